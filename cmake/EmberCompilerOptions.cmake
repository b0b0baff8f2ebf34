# Compiler settings shared by every Ember target: language level, warnings, CPU tuning, the
# sanitizer build and ccache. Flags are added for CXX only; CUDA sources get theirs in
# EmberCUDA.cmake because nvcc needs them spelled differently.

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# ccache makes the second CI pass and every rebuild after a branch switch cheap. A launcher the
# user set on the command line wins.
option(EMBER_CCACHE "Compile through ccache when it is installed" ON)
if(EMBER_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(EMBER_CCACHE_PROGRAM ccache)
  if(EMBER_CCACHE_PROGRAM)
    # The test programs precompile GoogleTest's header; ccache caches what uses a precompiled
    # header only when told that its __DATE__/__TIME__ and defines may be taken as they are.
    set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros
                                    ${EMBER_CCACHE_PROGRAM})
  endif()
endif()

add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wall> $<$<COMPILE_LANGUAGE:CXX>:-Wextra>)
# Options structs are meant to be filled with designated initializers that name only what
# differs from the defaults ({.batch_size = 64}); GCC would warn about every omitted member.
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-missing-field-initializers>)
if(EMBER_NATIVE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()

# EMBER_SANITIZE_FLAGS: the sanitizers, for compiling and linking (an installed sanitized library
# passes them on, EmberLibrary.cmake). EMBER_TSAN: the ThreadSanitizer build, whose tests differ.
set(EMBER_SANITIZE_FLAGS "")
set(EMBER_TSAN OFF)
if(EMBER_SANITIZE STREQUAL "thread")
  set(EMBER_SANITIZE_FLAGS -fsanitize=thread)
  set(EMBER_TSAN ON)
elseif(EMBER_SANITIZE)
  set(EMBER_SANITIZE_FLAGS -fsanitize=address,undefined)
endif()
if(EMBER_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${EMBER_SANITIZE_FLAGS}>"
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      # Line tables, so reports name file:line, unless the build type has -g already.
                      $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<CONFIG:Debug,RelWithDebInfo>>>:-g1>)
  if(NOT EMBER_TSAN)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  endif()
  add_link_options(${EMBER_SANITIZE_FLAGS})
endif()
