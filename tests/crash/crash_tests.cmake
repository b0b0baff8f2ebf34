# Crash consistency at random moments (kill_resume.sh): the MNIST CNN, a GAN and the LSTM language
# model killed with SIGKILL 30 times each at random moments and resumed, their final checkpoints
# compared bit for bit with an uninterrupted run's. Included by examples/CMakeLists.txt, which owns
# the training programs.
add_executable(ckpt_verify ${CMAKE_CURRENT_LIST_DIR}/ckpt_verify.cpp)
target_link_libraries(ckpt_verify PRIVATE ember_layers)
target_include_directories(ckpt_verify PRIVATE ${PROJECT_SOURCE_DIR})
set(_kill ${CMAKE_CURRENT_LIST_DIR}/kill_resume.sh $<TARGET_FILE:ckpt_verify> 30)
add_test(NAME crash.kill_resume_mnist_cnn
         COMMAND bash ${_kill} 1 -- $<TARGET_FILE:mnist_cnn> --limit 256 --epochs 2 --batch-size 32 --threads 1)
add_test(NAME crash.kill_resume_mnist_gan
         COMMAND bash ${_kill} 2 -- $<TARGET_FILE:mnist_gan> --limit 256 --epochs 2 --batch-size 32 --threads 1)
add_test(NAME crash.kill_resume_lstm_lm
         COMMAND bash ${_kill} 3 -- $<TARGET_FILE:lstm_lm> --limit 300 --epochs 2 --max-steps 16 --batch-size 8
                 --seq-len 32 --hidden 32 --sample-length 10 --threads 1)
set_tests_properties(crash.kill_resume_mnist_cnn crash.kill_resume_mnist_gan crash.kill_resume_lstm_lm
                     PROPERTIES LABELS crash TIMEOUT 900 ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
# A checkpoint write on a full disk (a small tmpfs the script mounts; skipped without root).
add_test(NAME crash.full_disk COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/full_disk.sh $<TARGET_FILE:ckpt_verify>
                                      $<TARGET_FILE:mnist_cnn>)
set_tests_properties(crash.full_disk PROPERTIES LABELS crash TIMEOUT 300 SKIP_REGULAR_EXPRESSION "^skipped:")
