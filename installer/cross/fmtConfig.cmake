# fmt for the Windows cross build, header-only (Debian's fmt headers with FMT_HEADER_ONLY, no compiled library).
# scripts/build-windows.sh copies this file to <prefix>/lib/cmake/fmt/ beside the copied headers.
get_filename_component(_sdt_fmt_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET fmt::fmt-header-only)
  add_library(fmt::fmt-header-only INTERFACE IMPORTED)
  set_target_properties(fmt::fmt-header-only PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_sdt_fmt_prefix}/include"
    INTERFACE_COMPILE_DEFINITIONS "FMT_HEADER_ONLY")
endif()
if(NOT TARGET fmt::fmt)
  add_library(fmt::fmt INTERFACE IMPORTED)
  set_target_properties(fmt::fmt PROPERTIES INTERFACE_LINK_LIBRARIES fmt::fmt-header-only)
endif()
unset(_sdt_fmt_prefix)
set(fmt_FOUND TRUE)
