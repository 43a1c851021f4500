# Sanitizer and fuzzing builds (scripts/sanitize.sh, fuzz/README.md).
#
#   -DRINGLET_SANITIZE=address,undefined   ASan + UBSan on everything (any compiler)
#   -DRINGLET_SANITIZE=thread              TSan
#   -DRINGLET_FUZZ=ON                      clang only: libFuzzer coverage on the library, ASan +
#                                          UBSan, and the libFuzzer targets in fuzz/
# A sanitized or fuzzing build turns CUDA off (nvcc does not take these flags).

set(RINGLET_SANITIZE "" CACHE STRING "Sanitizers to build with: address,undefined or thread")
option(RINGLET_FUZZ "Build the libFuzzer targets in fuzz/ (clang; implies ASan and UBSan)" OFF)

set(ringlet_sanitizers "${RINGLET_SANITIZE}")
if(RINGLET_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "RINGLET_FUZZ=ON needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14")
  endif()
  if(ringlet_sanitizers STREQUAL "")
    set(ringlet_sanitizers "address,undefined")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
endif()
if(NOT ringlet_sanitizers STREQUAL "")
  if(NOT ringlet_sanitizers MATCHES "^(address|undefined|thread)(,(address|undefined|thread))*$")
    message(FATAL_ERROR "RINGLET_SANITIZE='${ringlet_sanitizers}': expected a comma-separated "
                        "list of address, undefined, thread")
  endif()
  set(RINGLET_CUDA "OFF" CACHE STRING "CUDA support: AUTO, ON or OFF" FORCE)
  set(ringlet_sanitize_flags -fsanitize=${ringlet_sanitizers} -fno-omit-frame-pointer)
  if(ringlet_sanitizers MATCHES "undefined")
    # Every UBSan report fails the run, as an ASan report does.
    list(APPEND ringlet_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${ringlet_sanitize_flags}>")
  add_link_options(${ringlet_sanitize_flags})
  # The sanitizer runtime lives in the executables (clang links it statically): the shared
  # library keeps its sanitizer symbols undefined.
  set(RINGLET_ALLOW_UNDEFINED ON)
  message(STATUS "ringlet: sanitizers ${ringlet_sanitizers}")
endif()
