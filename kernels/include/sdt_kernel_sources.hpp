// The OpenCL C sources of kernels/*.cl, embedded at build time (see cmake/EmbedKernels.cmake).
#pragma once

#include <string_view>
#include <vector>

namespace sdt::kernels {
// The program built from kernels/<name>.cl: the prelude kernels/common.cl, a #line directive, then the file; for
// "common" the prelude alone. An empty view when there is no such file.
std::string_view source(std::string_view name);
// Every embedded file's name (without the .cl extension), "common" included.
std::vector<std::string_view> names();
}  // namespace sdt::kernels
