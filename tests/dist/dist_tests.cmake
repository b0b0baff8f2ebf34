# Included by tests/CMakeLists.txt when ember_dist is built.
file(GLOB dist_test_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/dist/*_test.cpp)
add_executable(ember_dist_tests ${dist_test_srcs} ${CMAKE_CURRENT_SOURCE_DIR}/dist/main.cpp)
target_link_libraries(ember_dist_tests PRIVATE ember_dist ember_models GTest::gtest)
target_include_directories(ember_dist_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/dist)
add_executable(ember_dist_fault ${CMAKE_CURRENT_SOURCE_DIR}/dist/fault_rank.cpp)
target_link_libraries(ember_dist_fault PRIVATE ember_dist)  # ember_dist brings ember_layers

# As root (containers, CI) OpenMPI refuses to start without these two variables.
set(dist_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE)
if(EMBER_SANITIZE)
  # OpenMPI's own allocations outlive MPI_Finalize; Ember's are still leak-checked. Suppressions
  # match only when OpenMPI's and PMIx's components stay loaded (no dlclose) and LeakSanitizer
  # unwinds through libraries built without frame pointers (slow unwinder).
  set(EMBER_DIST_SANITIZER_ENV OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
      "LSAN_OPTIONS=fast_unwind_on_malloc=0:suppressions=${CMAKE_CURRENT_SOURCE_DIR}/dist/lsan_mpi.supp:print_suppressions=0"
      CACHE INTERNAL "environment of MPI programs run by ctest in sanitizer builds (examples/ uses it too)")
  list(APPEND dist_env ${EMBER_DIST_SANITIZER_ENV})
endif()
foreach(np 2 3)
  add_test(NAME dist.mpi_np${np}
           COMMAND ${CMAKE_COMMAND} -E env ${dist_env}
                   ${MPIEXEC_EXECUTABLE} -np ${np} --oversubscribe $<TARGET_FILE:ember_dist_tests>)
  set_tests_properties(dist.mpi_np${np} PROPERTIES LABELS dist TIMEOUT 300 PROCESSORS 2)
endforeach()
# Pipeline x data parallelism needs four ranks for its 2 x 2 arrangement (oversubscribed on two
# cores: the models are tiny).
add_test(NAME dist.mpi_np4_pipeline
         COMMAND ${CMAKE_COMMAND} -E env ${dist_env}
                 ${MPIEXEC_EXECUTABLE} -np 4 --oversubscribe $<TARGET_FILE:ember_dist_tests>
                 --gtest_filter=Pipeline*:MpiComm.Split*)
set_tests_properties(dist.mpi_np4_pipeline PROPERTIES LABELS dist TIMEOUT 300 PROCESSORS 2)
# The communicator contract (comm_contract.h; tests/gpu/nccl_test.cpp runs it on NCCL) with four
# ranks, so that split() gives two groups of two with exchanges inside each (np2 and np3 above run
# it too).
add_test(NAME dist.comm_contract_np4
         COMMAND ${CMAKE_COMMAND} -E env ${dist_env}
                 ${MPIEXEC_EXECUTABLE} -np 4 --oversubscribe $<TARGET_FILE:ember_dist_tests>
                 --gtest_filter=CommContract*)
set_tests_properties(dist.comm_contract_np4 PROPERTIES LABELS dist TIMEOUT 120 PROCESSORS 2)
# all_reduce runs through shared memory on one node (above). Again on MPI alone, and through slots
# of 128 bytes, so that every tensor but the smallest takes many rounds.
add_test(NAME dist.mpi_np2_without_shared_memory
         COMMAND ${CMAKE_COMMAND} -E env ${dist_env} EMBER_MPI_SHM_SLOT_BYTES=0
                 ${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe $<TARGET_FILE:ember_dist_tests> --gtest_filter=MpiComm.*:Ddp.*)
add_test(NAME dist.mpi_np3_small_shared_memory_slots
         COMMAND ${CMAKE_COMMAND} -E env ${dist_env} EMBER_MPI_SHM_SLOT_BYTES=128
                 ${MPIEXEC_EXECUTABLE} -np 3 --oversubscribe $<TARGET_FILE:ember_dist_tests> --gtest_filter=MpiComm.*:Ddp.*)
# Rank 0 alone refuses the segment: every rank must then stay on MPI.
add_test(NAME dist.mpi_np2_one_rank_without_shared_memory
         COMMAND ${CMAKE_COMMAND} -E env ${dist_env}
                 ${MPIEXEC_EXECUTABLE} -np 1 --oversubscribe env EMBER_MPI_SHM_SLOT_BYTES=0
                 $<TARGET_FILE:ember_dist_tests> --gtest_filter=MpiComm.*
                 : -np 1 $<TARGET_FILE:ember_dist_tests> --gtest_filter=MpiComm.*)
set_tests_properties(dist.mpi_np2_without_shared_memory dist.mpi_np3_small_shared_memory_slots
                     dist.mpi_np2_one_rank_without_shared_memory
                     PROPERTIES LABELS dist TIMEOUT 300 PROCESSORS 2)
# Failure handling: a killed rank, a rank that leaves early, a stalled collective, a rank killed
# during data-parallel training.
# Each twice: the surviving ranks wait in a shared-memory all-reduce, or in MPI's.
foreach(mode kill leave stall ddp)
  foreach(variant "" _without_shared_memory)
    set(fault_env ${dist_env})
    if(variant)
      list(APPEND fault_env EMBER_MPI_SHM_SLOT_BYTES=0)
    endif()
    add_test(NAME dist.fault_${mode}${variant}
             COMMAND ${CMAKE_COMMAND} -E env ${fault_env} bash ${CMAKE_CURRENT_SOURCE_DIR}/dist/fault_test.sh
                     ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:ember_dist_fault> ${mode})
    # The issue's bound: the surviving ranks must be gone within 30 s of the failure.
    set_tests_properties(dist.fault_${mode}${variant} PROPERTIES LABELS dist TIMEOUT 45 PROCESSORS 2)
  endforeach()
endforeach()
# A pipeline stage that throws, is killed, or was started with other settings than its neighbour;
# a rank killed while the others wait outside any MPI call on device work (NCCL's case: its
# stand-in, dist/comm.h's register of incomplete device work).
foreach(mode pipeline_throw pipeline_kill pipeline_mismatch device_wait)
  add_test(NAME dist.fault_${mode}
           COMMAND ${CMAKE_COMMAND} -E env ${dist_env} bash ${CMAKE_CURRENT_SOURCE_DIR}/dist/fault_test.sh
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:ember_dist_fault> ${mode})
  set_tests_properties(dist.fault_${mode} PROPERTIES LABELS dist TIMEOUT 45 PROCESSORS 2)
endforeach()
# `ember launch` (tools/launch.cpp), with the MNIST example as the README runs it.
if(TARGET ember AND EMBER_BUILD_EXAMPLES)  # mnist_cnn is defined later, in examples/
  add_test(NAME dist.ember_launch
           COMMAND ${CMAKE_COMMAND} -E env OMP_WAIT_POLICY=PASSIVE ${dist_env}
                   bash ${CMAKE_CURRENT_SOURCE_DIR}/dist/launch_test.sh $<TARGET_FILE:ember> $<TARGET_FILE:mnist_cnn>)
  set_tests_properties(dist.ember_launch PROPERTIES LABELS "dist;tools" TIMEOUT 180 PROCESSORS 2)
endif()

# The NCCL backend on real GPUs (GPU label, tests/gpu/nccl_test.cpp): one rank on any GPU machine,
# two where the node has two GPUs; skipped (with the reason) where there are not enough.
if(EMBER_WITH_NCCL)
  add_executable(ember_gpu_nccl_tests ${CMAKE_CURRENT_SOURCE_DIR}/gpu/nccl_test.cpp)
  target_link_libraries(ember_gpu_nccl_tests PRIVATE ember_dist ember_models GTest::gtest)
  # tests/dist for comm_contract.h, the contract the MPI suites run too.
  target_include_directories(ember_gpu_nccl_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/dist)
  add_dependencies(ember_gpu_checks ember_gpu_nccl_tests)
  foreach(np 1 2)
    add_test(NAME gpu.nccl_np${np}
             COMMAND ${CMAKE_COMMAND} -E env ${dist_env}
                     ${MPIEXEC_EXECUTABLE} -np ${np} --oversubscribe $<TARGET_FILE:ember_gpu_nccl_tests>)
    set_tests_properties(gpu.nccl_np${np} PROPERTIES LABELS gpu TIMEOUT 300
                         SKIP_REGULAR_EXPRESSION "skipped: no CUDA device;skipped: fewer CUDA devices")
  endforeach()
endif()

# In the thread-sanitised build a report in any rank fails the test, whatever the ranks' exit
# statuses (the fault tests expect some ranks to fail).
if(EMBER_TSAN)
  get_property(dist_tests DIRECTORY PROPERTY TESTS)
  list(FILTER dist_tests INCLUDE REGEX "^dist\\.")
  set_tests_properties(${dist_tests} PROPERTIES FAIL_REGULAR_EXPRESSION "WARNING: ThreadSanitizer")
endif()
