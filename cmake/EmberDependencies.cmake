# Third-party libraries every build needs (scripts/setup.sh installs them on Debian 12).

# With clang this is LLVM's libomp (libomp-dev); OpenBLAS's libgomp calls then bind to the GOMP_
# entry points libomp also exports, which come first in the lookup order. (clang's
# -fopenmp=libgomp would not do: it links libgomp but ignores every OpenMP pragma.)
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
