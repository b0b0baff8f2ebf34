# Run-time CPU dispatch (core/cpu_capability.h, docs/ARCHITECTURE.md "CPU capability levels").
# Every .cpp of a cpu/ folder is compiled once per capability level through a generated one-line
# .cpp that #includes it, with the level's -march, EMBER_CPU_LEVEL (its ember::CpuCapability) and
# EMBER_CPU_NS (a namespace of its own); each copy registers its kernels under its level, and the
# process picks one level at start-up from cpuid. The rest of Ember is compiled for the compiler's
# default target, so the default build runs on any x86-64 CPU whatever machine built it.
#
#   baseline  no -march (the compiler's default: x86-64 with SSE2 on Debian's GCC and clang)
#   avx2      -march=x86-64-v3
#   avx512    -march=x86-64-v4
#   avx512bf16  -march=x86-64-v4 -mavx512bf16, for the sources matching EMBER_CPU_BF16_SOURCES only
#             (those with bfloat16 kernels); the other stubs run their avx512 kernels at this level
#   native    EMBER_NATIVE=ON: everything is built with -march=native, and the kernels once
#
# GCC before 13 miscompiles aggregate initialisation when its SLP vectoriser emits AVX-512 code
# (tests/compiler/slp_aggregate_test.cpp: a defaulted member of a struct passed by value gets
# the previous member's value). Where such code is generated, -fno-tree-slp-vectorize fences it
# off; the loop vectoriser, which the kernels rely on, stays on.

include(CheckCXXCompilerFlag)
include(CheckCXXSourceCompiles)

# OFF: the baseline level only, a third of the kernels' compile time, for builds that run one
# level anyway (meant for CI's sanitizer pass, whose three sanitized kernel copies cost more than
# anything else it compiles; not used there until that configuration has run the whole suite).
option(EMBER_CPU_DISPATCH "Compile the CPU kernels for the avx2 and avx512 levels too (x86-64)" ON)

set(EMBER_CPU_LEVELS)            # names, lowest first
set(EMBER_CPU_CAPABILITIES_BUILT 0)
# Flags every level's kernels get: none of them reads errno, and with math-errno GCC keeps every
# std::sqrt scalar (it must be able to set errno for a negative argument).
set(EMBER_CPU_COMMON_FLAGS -fno-math-errno)
# clang warns about every `#pragma omp simd` loop it leaves scalar; the loop helpers
# (core/cpu/loops.h) ask for it on every element function, including those that cannot vectorise
# at some level (std::pow, 64-bit integer division without AVX-512), so the hint is not an error.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  list(APPEND EMBER_CPU_COMMON_FLAGS -Wno-pass-failed)
endif()

# The GCC releases known to miscompile (12.2 verified; 13 and later not seen to).
set(EMBER_GCC_SLP_BUG OFF)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  set(EMBER_GCC_SLP_BUG ON)
endif()

if(EMBER_NATIVE)
  list(APPEND EMBER_CPU_LEVELS native)
  set(EMBER_CPU_LEVEL_native 4)
  set(EMBER_CPU_FLAGS_native)
  set(CMAKE_REQUIRED_FLAGS -march=native)
  check_cxx_source_compiles("#ifndef __AVX512F__\n#error no AVX-512\n#endif\nint main() {}" EMBER_NATIVE_HAS_AVX512)
  unset(CMAKE_REQUIRED_FLAGS)
  if(EMBER_NATIVE_HAS_AVX512 AND EMBER_GCC_SLP_BUG)
    message(STATUS "EMBER_NATIVE: this CPU has AVX-512 and GCC ${CMAKE_CXX_COMPILER_VERSION} miscompiles it; "
                   "building everything with -fno-tree-slp-vectorize")
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-tree-slp-vectorize>)
  endif()
else()
  list(APPEND EMBER_CPU_LEVELS baseline)
  set(EMBER_CPU_LEVEL_baseline 0)
  set(EMBER_CPU_FLAGS_baseline)
  if(EMBER_CPU_DISPATCH AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    check_cxx_compiler_flag(-march=x86-64-v3 EMBER_HAS_MARCH_V3)
    check_cxx_compiler_flag(-march=x86-64-v4 EMBER_HAS_MARCH_V4)
    if(EMBER_HAS_MARCH_V3)
      list(APPEND EMBER_CPU_LEVELS avx2)
      set(EMBER_CPU_LEVEL_avx2 1)
      set(EMBER_CPU_FLAGS_avx2 -march=x86-64-v3)
    else()
      message(WARNING "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} lacks -march=x86-64-v3: "
                      "the CPU kernels are built at the baseline level only")
    endif()
    if(EMBER_HAS_MARCH_V3 AND EMBER_HAS_MARCH_V4)
      list(APPEND EMBER_CPU_LEVELS avx512)
      set(EMBER_CPU_LEVEL_avx512 2)
      # GCC's generic tuning for x86-64-v4 keeps most loops at 256 bits; -mprefer-vector-width=512
      # was measured and not kept: short rows (13-wide MNIST feature maps) then fall to the scalar
      # epilogue, and nothing measured got faster.
      set(EMBER_CPU_FLAGS_avx512 -march=x86-64-v4)
      if(EMBER_GCC_SLP_BUG)
        list(APPEND EMBER_CPU_FLAGS_avx512 -fno-tree-slp-vectorize)
      endif()
      check_cxx_compiler_flag(-mavx512bf16 EMBER_HAS_MAVX512BF16)
      if(EMBER_HAS_MAVX512BF16)
        list(APPEND EMBER_CPU_LEVELS avx512bf16)
        set(EMBER_CPU_LEVEL_avx512bf16 3)
        set(EMBER_CPU_FLAGS_avx512bf16 ${EMBER_CPU_FLAGS_avx512} -mavx512bf16)
      endif()
    endif()
  endif()
endif()
foreach(level ${EMBER_CPU_LEVELS})
  math(EXPR EMBER_CPU_CAPABILITIES_BUILT "${EMBER_CPU_CAPABILITIES_BUILT} | (1 << ${EMBER_CPU_LEVEL_${level}})")
endforeach()
message(STATUS "Ember CPU kernels at: ${EMBER_CPU_LEVELS}")

# The sources compiled at the avx512bf16 level too: only those with bfloat16 kernels, since a copy
# of every cpu/ file would add a third to the kernels' compile time for code identical to avx512's
# (a stub without an avx512bf16 kernel runs its avx512 one, core/dispatch.h).
set(EMBER_CPU_BF16_SOURCES "(^|/)cpu/(gemm_kernel|copy_kernel|bf16_[a-z0-9_]+)\\.cpp$")

# ember_cpu_sources(<target> <source>...): adds one copy of each source per level to <target>,
# baseline first (at the avx512bf16 level, those matching EMBER_CPU_BF16_SOURCES). <source> paths are relative to the repository root (the copies #include them
# by that path, so another clone of the same sources hits the same ccache entries). Call it from
# the folder that made <target> (source properties are per folder).
function(ember_cpu_sources target)
  foreach(level ${EMBER_CPU_LEVELS})
    set(copies)
    foreach(src ${ARGN})
      if(level STREQUAL "avx512bf16" AND NOT src MATCHES "${EMBER_CPU_BF16_SOURCES}")
        continue()
      endif()
      set(out ${PROJECT_BINARY_DIR}/cpu_dispatch/${level}/${src})
      file(CONFIGURE OUTPUT ${out}
           CONTENT "// Generated by cmake/EmberCpuDispatch.cmake: ${src} at CPU level ${level}.\n#include \"${src}\"\n")
      list(APPEND copies ${out})
    endforeach()
    if(NOT copies)
      continue()
    endif()
    set_source_files_properties(${copies} PROPERTIES
      COMPILE_DEFINITIONS "EMBER_CPU_LEVEL=${EMBER_CPU_LEVEL_${level}};EMBER_CPU_NS=level_${level}"
      COMPILE_OPTIONS "${EMBER_CPU_COMMON_FLAGS};${EMBER_CPU_FLAGS_${level}}"
      # Other target flags than the rest of the target's files: a precompiled header built for
      # those would not fit (clang refuses it outright).
      SKIP_PRECOMPILE_HEADERS ON)
    target_sources(${target} PRIVATE ${copies})
  endforeach()
endfunction()

# ember_cpu_folder_sources(<out> <dir>): the .cpp files under <dir>'s cpu/ folders, relative to
# the repository root.
function(ember_cpu_folder_sources out dir)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${dir}/*.cpp)
  list(FILTER srcs INCLUDE REGEX "^${dir}/(.*/)?cpu/[^/]*\\.cpp$")
  set(rel)
  foreach(s ${srcs})
    file(RELATIVE_PATH r ${PROJECT_SOURCE_DIR} ${s})
    list(APPEND rel ${r})
  endforeach()
  set(${out} ${rel} PARENT_SCOPE)
endfunction()
