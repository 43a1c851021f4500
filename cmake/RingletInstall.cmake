# Installation: `cmake --install build --prefix P` puts into P
#   include/ringlet/*.h                the public headers
#   lib/libringlet.so.0.1.0 (+ links)  the library, SONAME libringlet.so.0.1
#   bin/ringlet-run, -info, -bench     the tools, with a RUNPATH to the library ($ORIGIN/../lib)
#   lib/cmake/ringlet/                 ringletConfig.cmake, its version file, ringletTargets*.cmake
#   lib/pkgconfig/ringlet.pc           for pkg-config
# and `cpack -G DEB` (in the build directory) packages the same tree. examples/downstream is a
# project that uses the result both ways; tests/install builds and runs it.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RINGLET_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ringlet)

# The library and its public headers (ringlet_api carries the include directory, as
# $<INSTALL_INTERFACE:include>). The layers are OBJECT libraries linked PRIVATE into ringlet,
# so neither they nor their dependencies (fmt, OpenSSL, CUDA, hwloc) appear in the exported
# interface: a user needs the headers, libringlet.so and Threads.
install(TARGETS ringlet ringlet_api
  EXPORT ringletTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ringlet
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

# The tools. The targets exist already (this file is included last), so CMAKE_INSTALL_RPATH
# would come too late: each gets its RUNPATH here, relative to where it lands ($ORIGIN/../lib),
# and is linked with it in the build tree too (build/bin next to build/lib). So install copies
# the file unchanged: CMake's install-time rewrite would need a build RUNPATH padded with an
# empty entry, which makes the loader search the current directory. Library directories outside
# the project (a dependency not in a system directory) are kept in both trees.
file(RELATIVE_PATH ringlet_bin_to_lib /${CMAKE_INSTALL_BINDIR} /${CMAKE_INSTALL_LIBDIR})
file(RELATIVE_PATH ringlet_build_bin_to_lib
  ${CMAKE_RUNTIME_OUTPUT_DIRECTORY} ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
set(ringlet_tool_rpath "$ORIGIN/${ringlet_bin_to_lib}")
if(NOT ringlet_build_bin_to_lib STREQUAL ringlet_bin_to_lib)
  list(APPEND ringlet_tool_rpath "$ORIGIN/${ringlet_build_bin_to_lib}")
endif()
set(RINGLET_INSTALLED_TOOLS)
# ringlet-train is an example that reads its data from the source tree: not installed.
foreach(tool ringlet-run ringlet-info ringlet-bench ringlet-model)
  if(TARGET ${tool})
    list(APPEND RINGLET_INSTALLED_TOOLS ${tool})
  endif()
endforeach()
set_target_properties(${RINGLET_INSTALLED_TOOLS} PROPERTIES
  INSTALL_RPATH "${ringlet_tool_rpath}"
  BUILD_WITH_INSTALL_RPATH ON
  INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS ${RINGLET_INSTALLED_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# find_package(ringlet): ringlet::ringlet (and ringlet::ringlet_api, which it brings along).
install(EXPORT ringletTargets
  NAMESPACE ringlet::
  FILE ringletTargets.cmake
  DESTINATION ${RINGLET_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ringletConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/ringletConfig.cmake
  INSTALL_DESTINATION ${RINGLET_INSTALL_CMAKEDIR})
# SameMinorVersion: the SONAME is libringlet.so.MAJOR.MINOR, so while the major version is 0
# every minor release may change the ABI and the API. find_package(ringlet 0.1) must accept
# 0.1.x (same SONAME) and refuse 0.2, which SameMajorVersion would wrongly accept.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/ringletConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/install/ringletConfig.cmake
  ${PROJECT_BINARY_DIR}/install/ringletConfigVersion.cmake
  DESTINATION ${RINGLET_INSTALL_CMAKEDIR})

# pkg-config. The prefix is found from the .pc file's own place (${pcfiledir}), not written in
# at configure time: `cmake --install --prefix P` and CPack's staging directory both install
# somewhere other than CMAKE_INSTALL_PREFIX, and the tree stays usable when moved.
file(RELATIVE_PATH ringlet_pc_to_prefix
  /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" ringlet_pc_to_prefix "${ringlet_pc_to_prefix}")
set(RINGLET_PC_PREFIX "\${pcfiledir}/${ringlet_pc_to_prefix}")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(RINGLET_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(RINGLET_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/ringlet.pc.in ${PROJECT_BINARY_DIR}/install/ringlet.pc
  @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/ringlet.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# cpack -G DEB (run in the build directory) makes an installable package of the same tree.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ringlet)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR ringlet)
if(NOT CPACK_PACKAGE_CONTACT)  # the Maintainer field; -DCPACK_PACKAGE_CONTACT="Name <mail>"
  set(CPACK_PACKAGE_CONTACT "ringlet maintainers")
endif()
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Collective communication (all-reduce, broadcast, barrier) over TCP and shared memory")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # no debug info in the package (RelWithDebInfo builds carry it)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The library's own directory, for dpkg-shlibdeps to resolve libringlet.so.0.1 of the tools.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
include(CPack)
