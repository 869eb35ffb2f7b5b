// The OpenCL C sources of kernels/*.cl, embedded at build time (see cmake/EmbedKernels.cmake).
#pragma once

#include <string_view>
#include <vector>

namespace sdt::kernels {
// The source of kernels/<name>.cl, or an empty view when there is no such file.
std::string_view source(std::string_view name);
// Every embedded file's name (without the .cl extension).
std::vector<std::string_view> names();
}  // namespace sdt::kernels
