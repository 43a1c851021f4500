# One CMake target per layer, and includes that can only go down.
#
#   ringlet_layer(<target> DIR <folder> [HEADERS <header>...] SOURCES <file>...
#                 [DEPS <layer or library>...] [PRIVATE_DEPS <...>])
#
# Every layer is an OBJECT library whose objects go into the one ringlet library. Includes are
# written from the project root ("collectives/chunking.h"), but no target gets the project root
# as an include directory: each layer's own headers (every *.h in DIR, or the HEADERS listed)
# are linked into build/layers/<target>/<same path>, and a target sees only its own staging
# directory and those of the layers it links (as Bazel's virtual includes do). So an include that
# goes the wrong way is a "No such file" compile error, not a convention: collectives/ cannot
# include src/core/..., transports/tcp cannot include collectives/...
#
# DEPS are the allowed arrows that this layer's headers expose (PUBLIC); PRIVATE_DEPS the ones
# only its sources use. docs/architecture.md draws the picture.

set(RINGLET_LAYERS "" CACHE INTERNAL "every layer target, in definition order")

function(ringlet_layer name)
  cmake_parse_arguments(L "" "DIR" "HEADERS;SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT L_DIR)
    message(FATAL_ERROR "ringlet_layer(${name}): DIR is required")
  endif()
  set(stage ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${stage})
  if(L_HEADERS)
    set(headers)
    foreach(header IN LISTS L_HEADERS)
      list(APPEND headers ${PROJECT_SOURCE_DIR}/${header})
    endforeach()
  else()
    file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${L_DIR}/*.h)
  endif()
  foreach(header IN LISTS headers)
    file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${header})
    get_filename_component(folder ${stage}/${relative} DIRECTORY)
    file(MAKE_DIRECTORY ${folder})
    file(CREATE_LINK ${header} ${stage}/${relative} SYMBOLIC)
  endforeach()

  add_library(${name} OBJECT ${L_SOURCES})
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${stage}>)
  target_link_libraries(${name} PUBLIC ringlet_api ${L_DEPS} PRIVATE ${L_PRIVATE_DEPS})
  set_target_properties(${name} PROPERTIES RINGLET_LAYER_DIR ${L_DIR})
  set(RINGLET_LAYERS ${RINGLET_LAYERS} ${name} CACHE INTERNAL "")
endfunction()

# ringlet_add_transport(<folder>): builds transports/<folder> (which defines the layer
# ringlet_transport_<folder> and the function transport::<folder>::transportEntry()) and puts it
# into the transport table (transports/registry.h). The one line that switches a transport on.
set(RINGLET_TRANSPORTS "" CACHE INTERNAL "transport folders in the table")
macro(ringlet_add_transport folder)
  add_subdirectory(${folder})
  if(NOT TARGET ringlet_transport_${folder})
    message(FATAL_ERROR "transports/${folder} must define the layer ringlet_transport_${folder}")
  endif()
  set(RINGLET_TRANSPORTS ${RINGLET_TRANSPORTS} ${folder} CACHE INTERNAL "")
endmacro()
