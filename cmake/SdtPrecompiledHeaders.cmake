# Precompiled headers for the native build: what nearly every translation unit parses again (the standard library,
# spdlog and fmt, nlohmann-json, GoogleTest, Qt's widget and test headers) is parsed once per target instead. Parsing
# is most of a test's compile time (a QtTest file: 11 of its 16 s) and builds are most of CI's time on two cores.
# Off when cross-compiling: the Windows build then also checks that every file includes what it uses, which a
# precompiled header would hide.
if(CMAKE_CROSSCOMPILING)
  set(sdt_pch_default OFF)
else()
  set(sdt_pch_default ON)
endif()
option(SDT_PRECOMPILED_HEADERS "Precompile the common headers of each target" ${sdt_pch_default})

set(SDT_PCH_STANDARD
    <algorithm> <array> <atomic> <chrono> <cstdint> <cstring> <filesystem> <functional> <map> <memory> <mutex>
    <optional> <span> <string> <string_view> <thread> <unordered_map> <utility> <vector>)

# sdt_precompile_headers(target KIND): KIND gtest (standard library, spdlog, nlohmann-json, GoogleTest), qt
# (standard library, spdlog, Qt Widgets and Network) or qttest (Qt's and QtTest).
# Where code generation dominates (the engine's and the CLI's objects: nlohmann-json's templates) a precompiled
# header measured slower, 329 -> 350 core-seconds for the engine, and CLI11's header made each CLI object 8-10 s
# slower, so they have none.
function(sdt_precompile_headers target kind)
  if(NOT SDT_PRECOMPILED_HEADERS)
    return()
  endif()
  set(headers ${SDT_PCH_STANDARD} <spdlog/spdlog.h>)
  if(kind STREQUAL "gtest")
    list(APPEND headers <nlohmann/json.hpp> <gtest/gtest.h>)
  endif()
  if(kind STREQUAL "qt" OR kind STREQUAL "qttest")
    list(APPEND headers <QtWidgets> <QtNetwork>)
  endif()
  if(kind STREQUAL "qttest")
    list(APPEND headers <QtTest>)
  endif()
  list(TRANSFORM headers PREPEND "$<$<COMPILE_LANGUAGE:CXX>:")
  list(TRANSFORM headers APPEND ">")
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()

# sdt_reuse_precompiled_headers(target donor): target compiles with donor's precompiled header (same flags, one
# source file each, as the desktop app's tests: one header build for all of them instead of one each).
function(sdt_reuse_precompiled_headers target donor)
  if(SDT_PRECOMPILED_HEADERS)
    target_precompile_headers(${target} REUSE_FROM ${donor})
  endif()
endfunction()
