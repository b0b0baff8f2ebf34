# Third-party libraries every build needs (scripts/setup.sh installs them on Debian 12).

# clang's -fopenmp means LLVM's libomp; OpenBLAS (below) runs on GCC's libgomp, and two OpenMP
# runtimes in one process each start their own thread pool. clang builds against libgomp too
# (it needs only libomp-dev's omp.h for that).
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND NOT OpenMP_CXX_FLAGS)
  find_library(EMBER_LIBGOMP NAMES gomp libgomp.so.1 REQUIRED)
  set(OpenMP_CXX_FLAGS -fopenmp=libgomp)
  set(OpenMP_CXX_LIB_NAMES gomp)
  set(OpenMP_gomp_LIBRARY ${EMBER_LIBGOMP})
endif()
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Threads REQUIRED)

# The OpenMP flavour of OpenBLAS, so that GEMMs share Ember's OpenMP threads instead of starting
# a pool of their own. It is a private dependency of ember_core: the interface target exists only
# in the build tree and never appears in the installed package.
find_path(EMBER_CBLAS_INCLUDE cblas.h
  HINTS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/aarch64-linux-gnu/openblas-openmp
  PATH_SUFFIXES openblas)
find_library(EMBER_OPENBLAS NAMES openblas
  HINTS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp)
if(NOT EMBER_CBLAS_INCLUDE OR NOT EMBER_OPENBLAS)
  message(FATAL_ERROR "OpenBLAS not found: run scripts/setup.sh (Debian: libopenblas-openmp-dev)")
endif()
add_library(ember_openblas INTERFACE)
target_include_directories(ember_openblas INTERFACE ${EMBER_CBLAS_INCLUDE})
target_link_libraries(ember_openblas INTERFACE ${EMBER_OPENBLAS})
