# Run as a script at build time: turns each OpenCL C file into a byte array in one C++ source so the
# executables carry their kernels. The .cl files stay the single, readable source.
#   cmake -DOUTPUT=embedded.cpp -DINPUTS="a.cl;b.cl" -P EmbedKernels.cmake
set(body "")
set(table "")
foreach(path IN LISTS INPUTS)
  get_filename_component(name "${path}" NAME_WE)
  file(READ "${path}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
  string(APPEND body "static const unsigned char k_${name}[] = {\n${bytes}0x00};\n")
  string(APPEND table "    {\"${name}\", std::string_view(reinterpret_cast<const char*>(k_${name}), sizeof(k_${name}) - 1)},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from kernels/*.cl by cmake/EmbedKernels.cmake. Do not edit.\n#include \"sdt_kernel_sources.hpp\"\n\n#include <array>\n#include <utility>\n\nnamespace {\n${body}\nconst std::pair<std::string_view, std::string_view> kTable[] = {\n${table}};\n}  // namespace\n\nnamespace sdt::kernels {\nstd::string_view source(std::string_view name) {\n  for (const auto& [n, s] : kTable)\n    if (n == name) return s;\n  return {};\n}\nstd::vector<std::string_view> names() {\n  std::vector<std::string_view> out;\n  for (const auto& entry : kTable) out.push_back(entry.first);\n  return out;\n}\n}  // namespace sdt::kernels\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")
