# spdlog for the Windows cross build, header-only: Debian's spdlog headers (built against an external fmt) and
# Debian's fmt headers, both used without their compiled libraries. scripts/build-windows.sh copies this file to
# <prefix>/lib/cmake/spdlog/ beside the copied headers in <prefix>/include.
get_filename_component(_sdt_spdlog_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET spdlog::spdlog)
  add_library(spdlog::spdlog INTERFACE IMPORTED)
  set_target_properties(spdlog::spdlog PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_sdt_spdlog_prefix}/include"
    INTERFACE_COMPILE_DEFINITIONS "SPDLOG_HEADER_ONLY;SPDLOG_FMT_EXTERNAL;FMT_HEADER_ONLY")
endif()
if(NOT TARGET spdlog::spdlog_header_only)
  add_library(spdlog::spdlog_header_only INTERFACE IMPORTED)
  set_target_properties(spdlog::spdlog_header_only PROPERTIES INTERFACE_LINK_LIBRARIES spdlog::spdlog)
endif()
unset(_sdt_spdlog_prefix)
set(spdlog_FOUND TRUE)
