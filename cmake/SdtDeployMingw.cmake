# Install-time deployment for a mingw-w64 build of the desktop app: puts next to the programs in bin/ the DLLs and
# Qt plugins they load at run time, and nothing else. It does what Qt's windeployqt does for an MSVC build
# (.github/workflows/windows.yml), which is not available for a cross build on Linux.
#
# The list is derived from the programs themselves, never written by hand: the imports of each executable
# (`objdump -p`, its "DLL Name:" lines) are resolved, recursively, against Qt's bin/ and the compiler's runtime
# folders; a DLL found there is copied. Qt's plugins are chosen by the Qt modules that end up loaded, as windeployqt
# does (Gui: the `windows` platform and any image-format or icon-engine plugins; Widgets: the styles; Network: the
# Schannel TLS backend and any network-information plugins), and their own imports are resolved the same way. So
# when the app starts linking another Qt module, its DLL and plugins come along without a change here.
#
# An import that is neither found there nor one of Windows' own DLLs stops the installation with its name: the
# installer would otherwise ship a program that Windows refuses to start. Windows' own DLLs are those the mingw-w64
# sysroot has an import library for (lib<name>.a), less Microsoft's redistributable C/C++ runtimes; OpenCL.dll
# comes with the graphics driver and is never shipped.
#
# Used by installer/CMakeLists.txt, which sets before including this file:
#   SDT_DEPLOY_OBJDUMP        x86_64-w64-mingw32-objdump
#   SDT_DEPLOY_BIN            the installed bin/ folder (under DESTDIR / CPack's staging folder)
#   SDT_DEPLOY_EXECUTABLES    file names in SDT_DEPLOY_BIN whose imports are resolved (sdturbo.exe, ...)
#   SDT_DEPLOY_QT_BIN         Qt's folder of DLLs
#   SDT_DEPLOY_QT_PLUGINS     Qt's plugins folder
#   SDT_DEPLOY_RUNTIME_DIRS   folders of the compiler's runtime DLLs (libstdc++-6.dll, libgcc_s_seh-1.dll, ...)
#   SDT_DEPLOY_SYSTEM_LIBS    the mingw-w64 sysroot's lib/ folder (import libraries of Windows' DLLs)

# Install scripts run without the project's policies (IN_LIST, POP_FRONT need these).
cmake_policy(VERSION 3.25)

foreach(var SDT_DEPLOY_OBJDUMP SDT_DEPLOY_BIN SDT_DEPLOY_EXECUTABLES SDT_DEPLOY_QT_BIN SDT_DEPLOY_QT_PLUGINS
            SDT_DEPLOY_RUNTIME_DIRS SDT_DEPLOY_SYSTEM_LIBS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "SdtDeployMingw: ${var} is not set")
  endif()
endforeach()

# The DLL names a PE file imports, lower-case.
function(sdt_pe_imports file out_var)
  execute_process(COMMAND ${SDT_DEPLOY_OBJDUMP} -p ${file} OUTPUT_VARIABLE dump ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "SdtDeployMingw: '${SDT_DEPLOY_OBJDUMP} -p ${file}' failed: ${err}")
  endif()
  string(REGEX MATCHALL "DLL Name: [^\r\n]+" lines "${dump}")
  set(names "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^DLL Name: " "" name "${line}")
    string(STRIP "${name}" name)
    string(TOLOWER "${name}" name)
    list(APPEND names ${name})
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out_var} ${names} PARENT_SCOPE)
endfunction()

# Where a DLL comes from: sets <out_var> to its path when we ship it, to "system" for Windows' own DLLs (and the
# driver's OpenCL.dll), to "" when it is nowhere.
function(sdt_locate_dll name out_var)
  # Qt's and the runtime's DLLs are matched case-insensitively (imports are case-insensitive on Windows).
  foreach(dir ${SDT_DEPLOY_QT_BIN} ${SDT_DEPLOY_RUNTIME_DIRS})
    file(GLOB candidates LIST_DIRECTORIES false "${dir}/*.dll")
    foreach(candidate IN LISTS candidates)
      get_filename_component(candidate_name ${candidate} NAME)
      string(TOLOWER "${candidate_name}" candidate_name)
      if(candidate_name STREQUAL name)
        set(${out_var} ${candidate} PARENT_SCOPE)
        return()
      endif()
    endforeach()
  endforeach()
  string(REGEX REPLACE "\\.dll$" "" stem "${name}")
  if(name STREQUAL "opencl.dll" OR name MATCHES "^api-ms-win-" OR name MATCHES "^ext-ms-win-")
    set(${out_var} system PARENT_SCOPE)
  elseif(EXISTS "${SDT_DEPLOY_SYSTEM_LIBS}/lib${stem}.a" AND NOT stem MATCHES "^(msvc[pr][0-9]+|vcruntime[0-9]+)")
    set(${out_var} system PARENT_SCOPE)
  else()
    set(${out_var} "" PARENT_SCOPE)
  endif()
endfunction()

# The plugins each Qt module brings (windeployqt's choice for these modules): plugin folder and file pattern.
set(sdt_plugins_qt6gui.dll "platforms/qwindows.dll" "imageformats/*.dll" "iconengines/*.dll")
set(sdt_plugins_qt6widgets.dll "styles/*.dll")
# The Schannel backend only: Windows' TLS. (Qt also builds a certificate-only backend, of no use next to it.)
set(sdt_plugins_qt6network.dll "tls/qschannelbackend.dll" "networkinformation/*.dll")

set(pending "")
foreach(exe IN LISTS SDT_DEPLOY_EXECUTABLES)
  if(NOT EXISTS "${SDT_DEPLOY_BIN}/${exe}")
    message(FATAL_ERROR "SdtDeployMingw: ${SDT_DEPLOY_BIN}/${exe} is not installed")
  endif()
  list(APPEND pending "${SDT_DEPLOY_BIN}/${exe}")
endforeach()
set(seen "")          # lower-case DLL names already handled
set(shipped "")       # source paths of the DLLs we copy
set(plugins "")       # source paths of the plugins we copy (relative folder kept)
set(system_dlls "")
while(pending)
  list(POP_FRONT pending file)
  sdt_pe_imports(${file} imports)
  foreach(name IN LISTS imports)
    if(name IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${name})
    sdt_locate_dll(${name} where)
    if(where STREQUAL "system")
      list(APPEND system_dlls ${name})
    elseif(where)
      list(APPEND shipped ${where})
      list(APPEND pending ${where})
      foreach(pattern IN LISTS sdt_plugins_${name})
        file(GLOB found LIST_DIRECTORIES false "${SDT_DEPLOY_QT_PLUGINS}/${pattern}")
        foreach(plugin IN LISTS found)
          list(APPEND plugins ${plugin})
          list(APPEND pending ${plugin})
        endforeach()
      endforeach()
    else()
      get_filename_component(importer ${file} NAME)
      message(FATAL_ERROR "SdtDeployMingw: ${importer} imports ${name}, which is neither in Qt's bin/ "
                          "(${SDT_DEPLOY_QT_BIN}), nor a compiler runtime DLL (${SDT_DEPLOY_RUNTIME_DIRS}), nor one of "
                          "Windows' own DLLs: the installed program would not start")
    endif()
  endforeach()
endwhile()

if(NOT "${SDT_DEPLOY_QT_PLUGINS}/platforms/qwindows.dll" IN_LIST plugins)
  message(FATAL_ERROR "SdtDeployMingw: no platforms/qwindows.dll in ${SDT_DEPLOY_QT_PLUGINS}: a Qt app cannot start "
                      "on Windows without it")
endif()

foreach(dll IN LISTS shipped)
  file(INSTALL ${dll} DESTINATION ${SDT_DEPLOY_BIN})
endforeach()
foreach(plugin IN LISTS plugins)
  file(RELATIVE_PATH relative ${SDT_DEPLOY_QT_PLUGINS} ${plugin})
  get_filename_component(folder ${relative} DIRECTORY)
  file(INSTALL ${plugin} DESTINATION ${SDT_DEPLOY_BIN}/${folder})
endforeach()
list(LENGTH shipped shipped_count)
list(LENGTH plugins plugin_count)
list(SORT system_dlls)
string(REPLACE ";" " " system_text "${system_dlls}")
message(STATUS "SdtDeployMingw: ${shipped_count} DLLs and ${plugin_count} Qt plugins next to ${SDT_DEPLOY_EXECUTABLES}; "
               "from Windows: ${system_text}")
