# ringlet_add_test(NAME SOURCES a.cc b.cc [LABELS unit slow] [TIMEOUT 120] [LIBS x])
# Labels in use: unit (fast, threads only), process (forks ranks), failure (kills ranks),
# slow (minutes), gpu (needs a CUDA device; skips without one), trainer, ddp, torch.
include(GoogleTest)
function(ringlet_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE ringlet_test_support GTest::gtest_main ${T_LIBS})
  # Only scalar properties go through PROPERTIES: gtest_discover_tests re-expands them several
  # times on the way to the generated ctest file, so a list value (LABELS "unit;process") is
  # split there and every label after the first became a property name of its own, eating the
  # TIMEOUT that followed it. Escaping the ';' cannot survive that chain.
  gtest_discover_tests(${name}
    TEST_LIST ${name}_TESTS
    PROPERTIES TIMEOUT ${T_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
  # The labels are set by a ctest include file of our own, read after the one that
  # gtest_discover_tests registered just above (TEST_INCLUDE_FILES keeps the order), on the
  # tests that discovery listed in ${name}_TESTS. That list is unset while the target is not
  # built (ctest then sees the unlabelled ${name}_NOT_BUILT placeholder, as before), and it
  # leaves out test names with '[' or ']', which ringlet's tests do not use.
  if(T_LABELS)
    set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
    file(WRITE "${labels_file}"
      "if(${name}_TESTS)\n"
      "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS [==[${T_LABELS}]==])\n"
      "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
  endif()
endfunction()
