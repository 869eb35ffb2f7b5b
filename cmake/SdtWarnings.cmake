# Warnings for our own targets only (dependencies' headers are included as SYSTEM).
function(sdt_target_warnings target)
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4 /permissive-)
  else()
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local -Wno-unused-parameter)
  endif()
endfunction()
