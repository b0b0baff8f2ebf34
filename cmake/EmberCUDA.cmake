# The CUDA backend switch. EMBER_CUDA=AUTO builds core/cuda when a working toolkit is found (nvcc
# on PATH, in CUDACXX, under CUDA_PATH/CUDA_HOME or in /usr/local/cuda), ON requires one, OFF
# builds CPU-only. Sets EMBER_WITH_CUDA, EMBER_WITH_CUDNN and EMBER_WITH_NCCL, and provides:
#   ember_add_cuda_backend(<lib> <folder>)  compiles <folder>/cuda/*.{cu,cpp} into <lib>
#   ember_cudnn, ember_nccl                 build-tree-only link targets (when found)
# CMAKE_CUDA_ARCHITECTURES defaults to "80;90" (A100, H100/H200); set it to build for others.

set(EMBER_WITH_CUDA OFF)
set(EMBER_WITH_CUDNN OFF)
set(EMBER_WITH_NCCL OFF)

string(TOUPPER "${EMBER_CUDA}" _ember_cuda_mode)
if(NOT _ember_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "EMBER_CUDA must be AUTO, ON or OFF (got '${EMBER_CUDA}')")
endif()

if(NOT _ember_cuda_mode STREQUAL "OFF")
  # nvcc need not be on PATH: look where toolkits usually live.
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(EMBER_NVCC nvcc
      HINTS ENV CUDA_PATH ENV CUDA_HOME ENV CUDA_ROOT
      PATH_SUFFIXES bin
      PATHS /usr/local/cuda/bin /opt/cuda/bin)
    if(EMBER_NVCC)
      set(ENV{CUDACXX} ${EMBER_NVCC})
    endif()
  endif()
  # Host code in .cu files must be compiled by the same compiler as the rest of Ember.
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER AND NOT DEFINED ENV{CUDAHOSTCXX})
    set(ENV{CUDAHOSTCXX} ${CMAKE_CXX_COMPILER})
  endif()
  if(_ember_cuda_mode STREQUAL "AUTO")
    # A toolkit that cannot compile (wrong host compiler, broken install) means CPU-only, not a
    # failed configure.
    include(CheckLanguage)
    check_language(CUDA)
  elseif(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    message(FATAL_ERROR "EMBER_CUDA=ON but no nvcc was found: put it on PATH, set CUDACXX or "
                        "CMAKE_CUDA_COMPILER, or install the toolkit in /usr/local/cuda")
  endif()
  if(_ember_cuda_mode STREQUAL "ON" OR CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "GPU architectures to build CUDA code for")
    endif()
    # One CUDA runtime per process: the shared one, as cuDNN and NCCL use.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    # CMake 3.25 does not yet know nvcc's C++20 flag (nvcc has had it since CUDA 12).
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    find_package(CUDAToolkit REQUIRED)
    set(EMBER_WITH_CUDA ON)
  endif()
endif()

if(EMBER_WITH_CUDA)
  # cuDNN and NCCL ship with some toolkits (as here, under the toolkit's own lib/ and include/)
  # and as separate packages elsewhere (/usr/include/<arch>, /usr/lib/<arch>); CUDNN_ROOT and
  # NCCL_ROOT point anywhere else.
  set(_ember_cuda_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
  find_path(EMBER_CUDNN_INCLUDE_DIR cudnn.h
    HINTS ENV CUDNN_ROOT ENV CUDNN_PATH ${CUDAToolkit_INCLUDE_DIRS} ${_ember_cuda_hints}
    PATH_SUFFIXES include)
  find_library(EMBER_CUDNN_LIBRARY cudnn
    HINTS ENV CUDNN_ROOT ENV CUDNN_PATH ${CUDAToolkit_LIBRARY_DIR} ${_ember_cuda_hints}
    PATH_SUFFIXES lib64 lib)
  if(EMBER_CUDNN_INCLUDE_DIR AND EMBER_CUDNN_LIBRARY)
    set(EMBER_CUDNN_VERSION "")
    foreach(_h cudnn_version.h cudnn.h)
      if(NOT EMBER_CUDNN_VERSION AND EXISTS ${EMBER_CUDNN_INCLUDE_DIR}/${_h})
        file(STRINGS ${EMBER_CUDNN_INCLUDE_DIR}/${_h} _v REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
        string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*CUDNN_MINOR ([0-9]+).*CUDNN_PATCHLEVEL ([0-9]+).*"
               "\\1.\\2.\\3" EMBER_CUDNN_VERSION "${_v}")
      endif()
    endforeach()
    add_library(ember_cudnn INTERFACE)
    target_include_directories(ember_cudnn INTERFACE ${EMBER_CUDNN_INCLUDE_DIR})
    target_link_libraries(ember_cudnn INTERFACE ${EMBER_CUDNN_LIBRARY})
    set(EMBER_WITH_CUDNN ON)
  endif()

  find_path(EMBER_NCCL_INCLUDE_DIR nccl.h
    HINTS ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} ${_ember_cuda_hints}
    PATH_SUFFIXES include)
  find_library(EMBER_NCCL_LIBRARY nccl
    HINTS ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR} ${_ember_cuda_hints}
    PATH_SUFFIXES lib64 lib)
  if(EMBER_NCCL_INCLUDE_DIR AND EMBER_NCCL_LIBRARY)
    file(STRINGS ${EMBER_NCCL_INCLUDE_DIR}/nccl.h _v REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*"
           "\\1.\\2.\\3" EMBER_NCCL_VERSION "${_v}")
    add_library(ember_nccl INTERFACE)
    target_include_directories(ember_nccl INTERFACE ${EMBER_NCCL_INCLUDE_DIR})
    target_link_libraries(ember_nccl INTERFACE ${EMBER_NCCL_LIBRARY} CUDA::cudart)
    set(EMBER_WITH_NCCL ON)
  endif()

  foreach(_lib CUDNN NCCL)
    if(EMBER_WITH_${_lib})
      set(_ember_${_lib}_msg "${EMBER_${_lib}_VERSION} (${EMBER_${_lib}_LIBRARY})")
    else()
      set(_ember_${_lib}_msg "not found")
    endif()
  endforeach()
  # cuBLAS is found (CUDA::cublas) but linked only by the code that calls it: loading it costs
  # about a quarter of a second per process, and every test case is a process.
  if(NOT TARGET CUDA::cublas)
    message(WARNING "Ember: the CUDA toolkit has no cuBLAS; the cuBLAS implementations will be missing")
  endif()
  message(STATUS "Ember: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}) for architectures "
                 "${CMAKE_CUDA_ARCHITECTURES}; cuBLAS ${CUDA_cublas_LIBRARY}; cuDNN ${_ember_CUDNN_msg}; "
                 "NCCL ${_ember_NCCL_msg}")
else()
  message(STATUS "Ember: CUDA backend off (EMBER_CUDA=${EMBER_CUDA}); building CPU-only")
endif()

# ember_add_cuda_backend(<lib> <folder>): compiles <folder>/cuda/*.cu and *.cpp into an object
# library <lib>_cuda whose objects become part of <lib> (core/cuda is part of core, so it may use
# everything in core and registers its kernels into core's dispatch stubs at load time).
# Every .cu goes through scripts/check-ptxas.sh, which fails the build when a kernel spills
# registers and its source does not say why that is accepted (`// spill-accepted: <reason>`).
function(ember_add_cuda_backend lib folder)
  if(NOT EMBER_WITH_CUDA)
    return()
  endif()
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/cuda/*.cu
                                   ${PROJECT_SOURCE_DIR}/${folder}/cuda/*.cpp)
  if(NOT srcs)
    return()
  endif()
  set(obj ${lib}_cuda)
  add_library(${obj} OBJECT ${srcs})
  target_include_directories(${obj} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include
                                            ${EMBER_GENERATED_INCLUDE_DIR})
  target_link_libraries(${obj} PRIVATE CUDA::cudart OpenMP::OpenMP_CXX)
  if(EMBER_WITH_CUDNN)
    target_link_libraries(${obj} PRIVATE ember_cudnn)
  endif()
  target_compile_options(${obj} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  set(launcher ${PROJECT_SOURCE_DIR}/scripts/check-ptxas.sh)
  if(EMBER_CCACHE_PROGRAM)
    list(APPEND launcher ${EMBER_CCACHE_PROGRAM})
  endif()
  set_target_properties(${obj} PROPERTIES CUDA_COMPILER_LAUNCHER "${launcher}")
  target_sources(${lib} PRIVATE $<TARGET_OBJECTS:${obj}>)
  # Shared runtime, linked privately: nothing CUDA reaches the installed package's interface.
  target_link_libraries(${lib} PRIVATE CUDA::cudart)
  if(EMBER_WITH_CUDNN)
    target_link_libraries(${lib} PRIVATE $<BUILD_INTERFACE:ember_cudnn>)
  endif()
  set_target_properties(${lib} PROPERTIES LINKER_LANGUAGE CXX)
endfunction()
