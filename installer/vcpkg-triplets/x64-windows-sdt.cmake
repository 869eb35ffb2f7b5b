# vcpkg triplet for the MSVC build of SD-Turbo Studio (.github/workflows/windows.yml): 64-bit, static libraries
# against the dynamic C runtime (/MD, like the Qt binaries), so the programs carry spdlog, fmt, libpng, zlib and
# utf8proc inside them. The one exception is OpenCL: the Khronos ICD loader stays the DLL OpenCL.dll, because the
# programs must use the loader that the GPU driver installs (a static loader would be a private copy of it).
set(VCPKG_TARGET_ARCHITECTURE x64)
set(VCPKG_CRT_LINKAGE dynamic)
set(VCPKG_LIBRARY_LINKAGE static)
if(PORT STREQUAL "opencl")
  set(VCPKG_LIBRARY_LINKAGE dynamic)
endif()
