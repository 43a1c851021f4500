# ringlet_add_test(NAME SOURCES a.cc b.cc [LABELS unit;slow] [TIMEOUT 120] [LIBS x])
# Labels in use: unit (fast, threads only), process (forks ranks), failure (kills ranks),
# slow (minutes), gpu (needs a CUDA device; skips without one), trainer.
include(GoogleTest)
function(ringlet_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE ringlet_test_support GTest::gtest_main ${T_LIBS})
  # A ;-list would be split inside PROPERTIES: escape it so every label survives.
  string(REPLACE ";" "\\;" labels "${T_LABELS}")
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${labels}" TIMEOUT ${T_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
endfunction()
