# CMake toolchain file: cross-compile for 64-bit Windows with Debian's mingw-w64 (the posix-thread variant, so
# std::thread and std::mutex exist), finding dependencies only in the mingw-w64 sysroot and in one prefix of
# Windows builds of our dependencies (scripts/build-windows.sh makes it under build/win64-deps/prefix).
#
#   cmake -S . -B build/win64 -DCMAKE_TOOLCHAIN_FILE=installer/mingw-w64-x86_64.cmake -DSDT_WIN64_PREFIX=<prefix>
#
# The host's /usr/include and /usr/lib are never searched: a Linux header or library in a Windows build fails in
# confusing ways (glibc's headers, ELF archives), so the find root is restricted and pkg-config looks only in the
# prefix.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)

set(SDT_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${SDT_MINGW_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${SDT_MINGW_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${SDT_MINGW_TRIPLE}-windres)
set(CMAKE_AR ${SDT_MINGW_TRIPLE}-gcc-ar-posix CACHE FILEPATH "Archiver")
set(CMAKE_RANLIB ${SDT_MINGW_TRIPLE}-gcc-ranlib-posix CACHE FILEPATH "Ranlib")

# The prefix may come from the command line or the environment; try_compile projects see it too.
if(NOT SDT_WIN64_PREFIX AND DEFINED ENV{SDT_WIN64_PREFIX})
  set(SDT_WIN64_PREFIX "$ENV{SDT_WIN64_PREFIX}")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SDT_WIN64_PREFIX)

set(CMAKE_FIND_ROOT_PATH /usr/${SDT_MINGW_TRIPLE})
if(SDT_WIN64_PREFIX)
  list(APPEND CMAKE_FIND_ROOT_PATH "${SDT_WIN64_PREFIX}")
  list(APPEND CMAKE_PREFIX_PATH "${SDT_WIN64_PREFIX}")
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # build tools (awk, python, cmake) are the host's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config would otherwise report the host's Linux libraries.
if(SDT_WIN64_PREFIX)
  set(ENV{PKG_CONFIG_LIBDIR} "${SDT_WIN64_PREFIX}/lib/pkgconfig")
else()
  set(ENV{PKG_CONFIG_LIBDIR} "${CMAKE_CURRENT_LIST_DIR}/no-pkgconfig-without-a-prefix")
endif()
set(ENV{PKG_CONFIG_PATH} "")

# Link libgcc, libstdc++ and winpthread statically: the executables then need only Windows' own DLLs and the
# system's OpenCL.dll (an import library stays an import library under -static).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
