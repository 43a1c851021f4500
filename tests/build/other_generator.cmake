# cmake -DSOURCE=... -DBINARY=... -DGENERATOR=... -DCUDA=... -P other_generator.cmake
file(REMOVE_RECURSE ${BINARY})
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -G ${GENERATOR} -DRINGLET_CUDA=${CUDA}
          -DRINGLET_BUILD_TESTS=OFF -DRINGLET_BUILD_BENCH=OFF -DRINGLET_BUILD_EXAMPLES=OFF
  RESULT_VARIABLE configured)
if(NOT configured EQUAL 0)
  message(FATAL_ERROR "configuring with \"${GENERATOR}\" failed (${configured})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} --target ringlet_base
                RESULT_VARIABLE built)
if(NOT built EQUAL 0)
  message(FATAL_ERROR "building ringlet_base with \"${GENERATOR}\" failed (${built})")
endif()
file(REMOVE_RECURSE ${BINARY})
message(STATUS "\"${GENERATOR}\" configures, generates and builds")
