# libtorch (PyTorch's C++ library) as an optional reference for the benchmarks under bench/,
# which print each Ember measurement beside the same thing in libtorch. Never a dependency of
# Ember itself. EMBER_BENCH_LIBTORCH=AUTO (use it when found), ON (fail without it), OFF.
#
# Found through its own CMake package (TorchConfig.cmake; Debian's libtorch-dev puts it in
# /usr/lib/<triplet>/cmake/Torch, a pip/zip libtorch is found with Torch_DIR or CMAKE_PREFIX_PATH).
# The package is loaded in a child scope (a function) so its global settings stay out of Ember's
# build, and what a bench needs is re-exported as the INTERFACE target ember_libtorch.
# Sets EMBER_WITH_LIBTORCH (ON/OFF) and EMBER_LIBTORCH_VERSION in the caller's scope.
#
# A bench links the reference only from its own translation unit, compiled as C++17 with
# warnings off (torch's headers are not -Wall -Wextra clean and predate C++20):
#   ember_libtorch_sources(<target> <torch-source> <fallback-source>)
# The fallback ("" for none) is compiled instead when libtorch is absent; the target also sees
# EMBER_WITH_LIBTORCH=1 when it is present.
include_guard(GLOBAL)

set(EMBER_BENCH_LIBTORCH AUTO CACHE STRING "Compare benchmarks with libtorch: AUTO, ON or OFF")
set_property(CACHE EMBER_BENCH_LIBTORCH PROPERTY STRINGS AUTO ON OFF)

function(_ember_find_libtorch)
  set(found OFF)
  set(version "")
  if(NOT EMBER_BENCH_LIBTORCH STREQUAL "OFF")
    find_package(Torch CONFIG QUIET)
    if(Torch_FOUND OR TORCH_FOUND)
      add_library(ember_libtorch INTERFACE)
      target_link_libraries(ember_libtorch INTERFACE ${TORCH_LIBRARIES})
      target_include_directories(ember_libtorch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
      set(found ON)
      set(version "${Torch_VERSION}")
    endif()
  endif()
  set(EMBER_WITH_LIBTORCH ${found} PARENT_SCOPE)
  set(EMBER_LIBTORCH_VERSION "${version}" PARENT_SCOPE)
endfunction()

if(NOT DEFINED EMBER_WITH_LIBTORCH)
  _ember_find_libtorch()
  if(EMBER_BENCH_LIBTORCH STREQUAL "ON" AND NOT EMBER_WITH_LIBTORCH)
    message(FATAL_ERROR "EMBER_BENCH_LIBTORCH=ON but no libtorch was found: install libtorch-dev "
                        "(Debian) or point Torch_DIR at a libtorch's share/cmake/Torch")
  endif()
  if(EMBER_WITH_LIBTORCH)
    message(STATUS "Benchmarks: libtorch ${EMBER_LIBTORCH_VERSION} found, used as the reference")
  else()
    message(STATUS "Benchmarks: no libtorch (EMBER_BENCH_LIBTORCH=${EMBER_BENCH_LIBTORCH}); reference columns say n/a")
  endif()
endif()

function(ember_libtorch_sources target torch_source fallback_source)
  if(EMBER_WITH_LIBTORCH)
    set(obj ${target}_libtorch)
    add_library(${obj} OBJECT ${torch_source})
    set_target_properties(${obj} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
    target_compile_options(${obj} PRIVATE -w)
    target_include_directories(${obj} PRIVATE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${obj} PRIVATE ember_libtorch)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
    target_link_libraries(${target} PRIVATE ember_libtorch)
    target_compile_definitions(${target} PRIVATE EMBER_WITH_LIBTORCH=1)
  elseif(fallback_source)
    target_sources(${target} PRIVATE ${fallback_source})
  endif()
endfunction()
