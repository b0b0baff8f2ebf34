# ember_library() makes the library of one top-level folder; ember_install_library() puts any
# library into the installed, exported CMake package (Ember::<name>, see EmberPackage.cmake).
# An upper folder's CMakeLists.txt joins the package with one call:
#   ember_library(ember_layers layers)
#   target_link_libraries(ember_layers PUBLIC ember_core)
# and names each third-party package its public interface needs with
#   ember_package_dependency(Protobuf)

# Headers include each other as "core/tensor.h": the source root in the build tree, and
# <prefix>/include/ember once installed (where <ember/ember.h> and <ember/config.h> also live).
set(EMBER_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)

# ember_library(<name> <folder> [extra sources...]): every .cpp under <folder> except its cuda/
# subfolder (CUDA sources are built by EmberCUDA.cmake) and its cpu/ folders, whose kernels are
# compiled once per CPU capability level (EmberCpuDispatch.cmake) after the other sources. <folder> may be given relative to the
# calling CMakeLists.txt ("." from layers/CMakeLists.txt) or to the repository root ("layers").
function(ember_library name folder)
  ember_folder_path(dir ${folder})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${dir}/*.cpp)
  list(FILTER srcs EXCLUDE REGEX "^${dir}/cuda/")
  list(FILTER srcs EXCLUDE REGEX "^${dir}/(.*/)?cpu/[^/]*\\.cpp$")
  add_library(${name} ${srcs} ${ARGN})
  ember_cpu_folder_sources(cpu_srcs ${dir})
  if(cpu_srcs)
    ember_cpu_sources(${name} ${cpu_srcs})
  endif()
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${EMBER_GENERATED_INCLUDE_DIR}>)
  add_library(Ember::${name} ALIAS ${name})
  ember_install_library(${name} ${dir})
endfunction()

# ember_folder_path(<out> <folder>): the absolute path of a top-level folder named either way.
function(ember_folder_path out folder)
  get_filename_component(dir ${folder} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  if(NOT IS_DIRECTORY ${dir} OR dir STREQUAL PROJECT_SOURCE_DIR)
    get_filename_component(dir ${folder} ABSOLUTE BASE_DIR ${PROJECT_SOURCE_DIR})
  endif()
  if(NOT IS_DIRECTORY ${dir} OR dir STREQUAL PROJECT_SOURCE_DIR)
    message(FATAL_ERROR "ember_library: '${folder}' is not a folder of the repository")
  endif()
  set(${out} ${dir} PARENT_SCOPE)
endfunction()

# ember_install_library(<target> [<folder>]): installs the library into the export set and, when
# a folder is given (named as for ember_library), its public headers (every .h under it, except the
# CUDA-only ones, which need the toolkit's headers, and the cpu/ ones, which only the per-level
# kernel copies can include) as <prefix>/include/ember/<folder>/...
function(ember_install_library name)
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(${name} INTERFACE
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/ember>)
  if(EMBER_SANITIZE)
    # A program linking a sanitized library needs the sanitizer runtimes too.
    target_link_options(${name} INTERFACE $<INSTALL_INTERFACE:${EMBER_SANITIZE_FLAGS}>)
  endif()
  install(TARGETS ${name} EXPORT EmberTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  if(ARGC GREATER 1)
    ember_folder_path(dir ${ARGV1})
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${dir})
    install(DIRECTORY ${dir}/
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember/${rel}
      FILES_MATCHING PATTERN "*.h"
      PATTERN "cuda" EXCLUDE
      PATTERN "cpu" EXCLUDE)
  endif()
  set_property(GLOBAL APPEND PROPERTY EMBER_EXPORTED_TARGETS ${name})
endfunction()

# ember_package_dependency(<find_dependency arguments>): a package that users of the installed
# Ember must find first because an exported target links it publicly (EmberConfig.cmake calls
# find_dependency with these arguments).
function(ember_package_dependency)
  list(JOIN ARGN " " args)
  get_property(deps GLOBAL PROPERTY EMBER_PACKAGE_DEPENDENCIES)
  if(NOT "find_dependency(${args})" IN_LIST deps)
    set_property(GLOBAL APPEND PROPERTY EMBER_PACKAGE_DEPENDENCIES "find_dependency(${args})")
  endif()
endfunction()
