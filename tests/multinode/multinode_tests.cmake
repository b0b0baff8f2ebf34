# Included by tests/CMakeLists.txt: distributed training across two hosts on this machine, each a
# network namespace with its own hostname, joined by a bridge (tests/multinode/hosts.sh). Label
# multinode; as root only (skipped, and says so, elsewhere; with CI=true they fail instead, since CI
# runs as root). Each test makes its own namespaces, under unique names, so they run in parallel.
if(TARGET ember AND TARGET ember_dist_tests AND EMBER_BUILD_EXAMPLES)  # mnist_cnn is defined in examples/
  foreach(mode suites train host_lost errors)
    add_test(NAME multinode.${mode}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/multinode/launch_test.sh ${mode} ${PROJECT_BINARY_DIR})
    # host_lost: the survivors must be gone within about the heartbeat's dead time (10 s) of the
    # kill; the others take 20-30 s on the loaded 2-core machine.
    set_tests_properties(multinode.${mode} PROPERTIES LABELS multinode TIMEOUT 180 PROCESSORS 2
                         SKIP_REGULAR_EXPRESSION "^skipped:")
  endforeach()
  set_tests_properties(multinode.host_lost multinode.errors PROPERTIES TIMEOUT 90)
  # Slurm with one slurmd per host (label slurm too: CI runs it with the other Slurm tests).
  add_test(NAME multinode.slurm
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/multinode/slurm_test.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  set_tests_properties(multinode.slurm PROPERTIES LABELS "multinode;slurm" TIMEOUT 300 PROCESSORS 2
                       SKIP_REGULAR_EXPRESSION "^skipped:")
endif()
