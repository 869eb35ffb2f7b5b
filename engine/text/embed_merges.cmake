# Run as a script at build time: embeds resources/clip/merges.txt (the bundled CLIP BPE merges) into one C++
# source, so single-file checkpoints can be tokenized without any file beside the executable.
#   cmake -DINPUT=merges.txt -DOUTPUT=clip_merges_embedded.cpp -P embed_merges.cmake
# A byte array rather than a string literal: MSVC caps string literals at 64 KB.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR byte_count "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# 32 bytes per line (CMake regexes have no {n} repeat, so the group is spelled out).
string(REPEAT "0x..," 32 line_pattern)
string(REGEX REPLACE "(${line_pattern})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from resources/clip/merges.txt by engine/text/embed_merges.cmake. Do not edit.\n"
  "#include <string_view>\n\n"
  "#include \"text/clip_vocab.hpp\"\n\n"
  "namespace {\nconst unsigned char kMerges[] = {\n${bytes}0x00};\n}  // namespace\n\n"
  "namespace sdt::text {\n"
  "std::string_view bundled_clip_merges() {\n"
  "  return std::string_view(reinterpret_cast<const char*>(kMerges), ${byte_count});\n"
  "}\n"
  "}  // namespace sdt::text\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")
