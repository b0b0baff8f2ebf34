# ctest driver (cmake -P): installs the current build into a fresh prefix, checks what was
# installed, then configures, builds and runs tests/install/consumer against that prefix only.
# Inputs: EMBER_BUILD_DIR, CONSUMER_SOURCE, WORK_DIR, GENERATOR, CXX, BUILD_TYPE.

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${EMBER_BUILD_DIR} --prefix ${prefix})

# The package: headers under include/ember, the config files, nothing pointing back at the
# build or source tree, and no private dependency (OpenBLAS) in the exported interface.
foreach(f include/ember/ember.h include/ember/config.h include/ember/core/tensor.h include/ember/core/ops.h
          include/ember/core/autograd/node.h include/ember/train/trainer.h include/ember/train/parallel_job.h
          lib/cmake/Ember/EmberConfig.cmake
          lib/cmake/Ember/EmberConfigVersion.cmake lib/cmake/Ember/EmberTargets.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
file(GLOB_RECURSE cmake_files ${prefix}/lib/cmake/Ember/*.cmake)
get_filename_component(source_dir ${CONSUMER_SOURCE}/../../.. ABSOLUTE)
foreach(f ${cmake_files})
  file(READ ${f} text)
  foreach(bad ${EMBER_BUILD_DIR} ${source_dir} openblas ember_openblas)
    string(FIND "${text}" "${bad}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} mentions '${bad}': the installed package must stand alone")
    endif()
  endforeach()
endforeach()
# In-job parallelism (built when MPI is found) installs as Ember::ember_dist, its headers as
# <ember/dist/...> beside the other top-level folders, none left under the job scheduler's.
file(READ ${prefix}/lib/cmake/Ember/EmberTargets.cmake targets_text)
if(targets_text MATCHES "Ember::ember_dist[ )]" AND NOT EXISTS ${prefix}/include/ember/dist/comm.h)
  message(FATAL_ERROR "Ember::ember_dist is exported but include/ember/dist/comm.h is not installed")
endif()
# The training library's headers read the same with and without MPI: whether it was built with
# the distributed library is decided inside it, not by a definition its users must repeat.
file(GLOB train_headers ${prefix}/include/ember/train/*.h)
foreach(f ${train_headers})
  file(STRINGS ${f} dist_lines REGEX "^#[ \t]*if.*EMBER_HAVE_DIST")
  if(dist_lines)
    message(FATAL_ERROR "${f} depends on EMBER_HAVE_DIST, which only the library's own build defines")
  endif()
endforeach()
if(EXISTS ${prefix}/include/ember/scheduler/parallel)
  message(FATAL_ERROR "headers installed under include/ember/scheduler/parallel: they live in include/ember/dist")
endif()
file(GLOB_RECURSE cuda_headers ${prefix}/include/ember/core/cuda/*)
if(cuda_headers)
  message(FATAL_ERROR "CUDA-internal headers were installed: ${cuda_headers}")
endif()

run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
# The training library's consumer: its flags parsed by the installed library, its log written.
execute_process(COMMAND ${WORK_DIR}/build/ember_train_consumer --epochs 3 --lr 0.01 WORKING_DIRECTORY ${WORK_DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE train_out ERROR_VARIABLE train_out)
message("${train_out}")
if(NOT rc EQUAL 0 OR NOT train_out MATCHES "epochs=3 lr=0.01\nepoch,step,loss\n1,6,0.25\n")
  message(FATAL_ERROR "ember_train_consumer (status ${rc}) did not print its flags and metrics log")
endif()
# A usage error is the library's: status 2 and the flag named.
execute_process(COMMAND ${WORK_DIR}/build/ember_train_consumer --epochs none WORKING_DIRECTORY ${WORK_DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE train_out ERROR_VARIABLE train_out)
if(NOT rc EQUAL 2 OR NOT train_out MATCHES "--epochs expects an integer, got 'none'")
  message(FATAL_ERROR "ember_train_consumer --epochs none: status ${rc}, output: ${train_out}")
endif()
run(${WORK_DIR}/build/ember_consumer)
message("${out}")

# y = 2x + 1 over 0..5, loss = sum(y * x) = sum(2x^2 + x) = 125, d loss/dx = 4x + 1.
foreach(want "ember " "tensor([[ 1.,  3.,  5.],\n        [ 7.,  9., 11.]]" "sum=125"
             "grad=tensor([[ 1.,  5.,  9.],\n        [13., 17., 21.]])")
  string(FIND "${out}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "consumer output lacks '${want}'")
  endif()
endforeach()
