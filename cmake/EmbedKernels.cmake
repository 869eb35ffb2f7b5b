# Run as a script at build time: turns each OpenCL C file into a byte array in one C++ source so the
# executables carry their kernels. The .cl files stay the single, readable source.
#   cmake -DOUTPUT=embedded.cpp -DPRELUDE=common.cl "-DINPUTS=a.cl;b.cl" -P EmbedKernels.cmake
# PRELUDE (kernels/common.cl: activation codes, bias loads, PTX macros) is put in front of every other program,
# followed by a #line directive so that a build log's line numbers are still those of the program's own file. It is
# also embedded on its own, under its name, for the test that checks it against the C++ side.
file(READ "${PRELUDE}" prelude)
get_filename_component(prelude_name "${PRELUDE}" NAME)
set(body "")
set(table "")
foreach(path IN LISTS INPUTS)
  get_filename_component(name "${path}" NAME_WE)
  get_filename_component(file_name "${path}" NAME)
  file(READ "${path}" text)
  if(NOT file_name STREQUAL prelude_name)
    set(text "${prelude}#line 1 \"${file_name}\"\n${text}")
  endif()
  string(HEX "${text}" hex)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
  string(APPEND body "static const unsigned char k_${name}[] = {\n${bytes}0x00};\n")
  string(APPEND table "    {\"${name}\", std::string_view(reinterpret_cast<const char*>(k_${name}), sizeof(k_${name}) - 1)},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from kernels/*.cl by cmake/EmbedKernels.cmake. Do not edit.\n#include \"sdt_kernel_sources.hpp\"\n\n#include <array>\n#include <utility>\n\nnamespace {\n${body}\nconst std::pair<std::string_view, std::string_view> kTable[] = {\n${table}};\n}  // namespace\n\nnamespace sdt::kernels {\nstd::string_view source(std::string_view name) {\n  for (const auto& [n, s] : kTable)\n    if (n == name) return s;\n  return {};\n}\nstd::vector<std::string_view> names() {\n  std::vector<std::string_view> out;\n  for (const auto& entry : kTable) out.push_back(entry.first);\n  return out;\n}\n}  // namespace sdt::kernels\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")
