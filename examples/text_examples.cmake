# The text examples (included from examples/CMakeLists.txt): an LSTM language model and a BiLSTM
# language classifier on Debian's fortune cookies.
foreach(example lstm_lm bilstm_classify)
  add_executable(${example} ${CMAKE_CURRENT_LIST_DIR}/${example}.cpp)
  target_link_libraries(${example} PRIVATE Ember::ember_train)
endforeach()

# End to end on a small subset: a few steps with a checkpoint, then a resume from it (its output
# goes to a file first: a `| grep -q` that ends early would kill it with SIGPIPE mid-run). The data
# are Debian's fortunes packages (scripts/setup.sh); without them the tests are skipped.
set(_fortunes /usr/share/games/fortunes)
add_test(NAME example.lstm_lm
         COMMAND bash -c "[ -d ${_fortunes} ] || exit 77; rm -rf ckpt_lstm_lm && $<TARGET_FILE:lstm_lm> --limit 300 --epochs 2 --max-steps 4 --batch-size 8 --seq-len 32 --hidden 32 --sample-length 40 --checkpoint-dir ckpt_lstm_lm --log ckpt_lstm_lm/metrics.csv && $<TARGET_FILE:lstm_lm> --limit 300 --epochs 2 --max-steps 4 --batch-size 8 --seq-len 32 --hidden 32 --sample-length 40 --checkpoint-dir ckpt_lstm_lm --resume auto | grep -q 'nothing to train' && $<TARGET_FILE:lstm_lm> --limit 300 --epochs 2 --max-steps 8 --batch-size 8 --seq-len 32 --hidden 32 --sample-length 40 --checkpoint-dir ckpt_lstm_lm --resume auto > ckpt_lstm_lm/resume.out && grep -q 'Resumed from .* at step 4 ' ckpt_lstm_lm/resume.out && grep -q 'unigram ppl' ckpt_lstm_lm/resume.out && test -s ckpt_lstm_lm/vocab.txt && test -s ckpt_lstm_lm/lstm_lm.ckpt")
add_test(NAME example.lstm_lm_word
         COMMAND bash -c "[ -d ${_fortunes} ] || exit 77; $<TARGET_FILE:lstm_lm> --level word --limit 300 --epochs 1 --max-steps 3 --batch-size 4 --seq-len 16 --hidden 16 --sample-length 10 | grep -q 'held-out loss'")
add_test(NAME example.bilstm_classify
         COMMAND bash -c "[ -d ${_fortunes}/de ] || exit 77; rm -rf ckpt_bilstm && $<TARGET_FILE:bilstm_classify> --limit 80 --epochs 2 --max-steps 4 --batch-size 8 --max-len 48 --hidden 16 --checkpoint-dir ckpt_bilstm --log ckpt_bilstm/metrics.csv && $<TARGET_FILE:bilstm_classify> --limit 80 --epochs 2 --max-steps 4 --batch-size 8 --max-len 48 --hidden 16 --checkpoint-dir ckpt_bilstm --resume auto | grep -q 'nothing to train' && $<TARGET_FILE:bilstm_classify> --limit 80 --epochs 2 --max-steps 8 --batch-size 8 --max-len 48 --hidden 16 --checkpoint-dir ckpt_bilstm --resume auto > ckpt_bilstm/resume.out && grep -q 'Resumed from' ckpt_bilstm/resume.out && grep -q 'Confusion matrix' ckpt_bilstm/resume.out && grep -q 'majority' ckpt_bilstm/resume.out")
# Resuming is exact: 4 steps + a resume to 8 ends with the train and held-out loss of 8 steps in one go
# (the train loss only since the epoch's running sums travel in the checkpoint).
set(_lm_small --limit 300 --epochs 1 --batch-size 8 --seq-len 32 --hidden 32 --sample-length 0)
string(JOIN " " _lm_small ${_lm_small})
add_test(NAME example.lstm_lm_resume_exact
         COMMAND bash -c "[ -d ${_fortunes} ] || exit 77; rm -rf lm_exact && mkdir lm_exact && $<TARGET_FILE:lstm_lm> ${_lm_small} --max-steps 8 --log lm_exact/straight.csv >/dev/null && $<TARGET_FILE:lstm_lm> ${_lm_small} --max-steps 4 --checkpoint-dir lm_exact/ck >/dev/null && $<TARGET_FILE:lstm_lm> ${_lm_small} --max-steps 8 --checkpoint-dir lm_exact/ck --resume auto --log lm_exact/resumed.csv >/dev/null && a=$(tail -n1 lm_exact/straight.csv | cut -d, -f2,3,5) && b=$(tail -n1 lm_exact/resumed.csv | cut -d, -f2,3,5) && echo \"straight $a resumed $b\" && [ -n \"$a\" ] && [ \"$a\" = \"$b\" ]")
# A resume whose data give another vocabulary is refused with a message (not silently wrong
# embeddings); SIGTERM mid-training writes a checkpoint and exits with status 75 (preempted). The
# signal is sent once the program says it is training (after its handlers are installed).
add_test(NAME example.lstm_lm_vocabulary_mismatch
         COMMAND bash -c "[ -d ${_fortunes} ] || exit 77; rm -rf lm_vocab && $<TARGET_FILE:lstm_lm> ${_lm_small} --max-steps 2 --checkpoint-dir lm_vocab >/dev/null && ! $<TARGET_FILE:lstm_lm> ${_lm_small} --limit 40 --max-steps 4 --checkpoint-dir lm_vocab --resume auto 2>lm_vocab/err.txt && grep -q 'vocabulary built now differs' lm_vocab/err.txt")
add_test(NAME example.lstm_lm_sigterm
         COMMAND bash -c "[ -d ${_fortunes} ] || exit 77; rm -rf lm_term && mkdir lm_term && { $<TARGET_FILE:lstm_lm> ${_lm_small} --epochs 50 --checkpoint-dir lm_term/ck >lm_term/out.txt 2>&1 & pid=$!; }; while kill -0 $pid 2>/dev/null && ! grep -q '^Training' lm_term/out.txt; do sleep 0.2; done; kill -TERM $pid; wait $pid; status=$?; tail -n 2 lm_term/out.txt; [ $status = 75 ] && grep -q 'Stopped by a signal' lm_term/out.txt && test -s lm_term/ck/last.ckpt")
add_test(NAME example.lstm_lm_help COMMAND lstm_lm --help)
add_test(NAME example.bilstm_classify_help COMMAND bilstm_classify --help)
# A missing corpus is a runtime error naming the path (status 1), a bad flag a usage error (2).
add_test(NAME example.lstm_lm_missing_data
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:lstm_lm> "-DARGS=--data;/nonexistent/fortunes" -DSTATUS=1
                 "-DREGEX='/nonexistent/fortunes' does not exist" -P ${PROJECT_SOURCE_DIR}/tools/expect_status.cmake)
add_test(NAME example.bilstm_classify_bad_flag
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:bilstm_classify> "-DARGS=--level;bytes" -DSTATUS=2
                 "-DREGEX=--level must be char or word, got 'bytes'" -P ${PROJECT_SOURCE_DIR}/tools/expect_status.cmake)
set_tests_properties(example.lstm_lm example.lstm_lm_word example.lstm_lm_resume_exact example.bilstm_classify
                     example.lstm_lm_vocabulary_mismatch example.lstm_lm_sigterm PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(example.lstm_lm example.lstm_lm_word example.lstm_lm_resume_exact example.bilstm_classify
                     example.lstm_lm_vocabulary_mismatch example.lstm_lm_sigterm
                     example.lstm_lm_help
                     example.bilstm_classify_help example.lstm_lm_missing_data example.bilstm_classify_bad_flag
                     PROPERTIES LABELS examples TIMEOUT 600)
# A depth that could not train (99999999 layers once hung building the model) is refused by name.
add_test(NAME example.lstm_lm_too_many_layers
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:lstm_lm> "-DARGS=--layers;100" -DSTATUS=2
                 "-DREGEX=--layers must be at most 64, got 100" -P ${PROJECT_SOURCE_DIR}/tools/expect_status.cmake)
set_tests_properties(example.lstm_lm_too_many_layers PROPERTIES LABELS examples)
add_test(NAME example.bilstm_classify_language_twice
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:bilstm_classify> "-DARGS=--languages;en=.,en=." -DSTATUS=2
                 "-DREGEX=--languages names 'en' twice" -P ${PROJECT_SOURCE_DIR}/tools/expect_status.cmake)
set_tests_properties(example.bilstm_classify_language_twice PROPERTIES LABELS examples)

# Data-parallel and pipeline training (--data-parallel, --pipeline K) when the distributed library
# is built (MPI found).
if(TARGET ember_dist)
  # A 2-layer model (embedding, two LSTM layers, output: four pipeline elements) with its gradient
  # clipped hard, so that clipping acts on every step: 4 steps as 2 pipeline stages, as 2 stages x
  # 2 replicas, and data-parallel on 2 ranks end with the train and held-out loss of one process
  # (float32, micro-batches summed in another order: within 1e-3 relative). The 2 x 2 run writes
  # a checkpoint that one process resumes (--reshard) and the model file.
  set(_lm_pp ${_lm_small} --layers 2 --clip 0.05 --max-steps 4)
  string(JOIN " " _lm_pp ${_lm_pp})
  set(_lm_close "awk -F, -v a=\"$a\" -v b=\"$b\" 'BEGIN { n = split(a, x, \",\"); split(b, y, \",\"); for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-3 * x[i]) exit 1 } }'")
  add_test(NAME example.lstm_lm_pipeline
           COMMAND bash -c "[ -d ${_fortunes} ] || exit 77; set -e; rm -rf lm_pp && mkdir lm_pp && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 && $<TARGET_FILE:lstm_lm> ${_lm_pp} --log lm_pp/one.csv >/dev/null && a=$(tail -n1 lm_pp/one.csv | cut -d, -f3,5) && for run in 'np2 -np 2 --pipeline 2 --micro-batches 3 --schedule gpipe' 'np4 -np 4 --pipeline 2 --micro-batches 2 --checkpoint-dir lm_pp/ck' 'dp -np 2 --data-parallel'; do set -- $run; name=$1; shift; np=\"$1 $2\"; shift 2; ${MPIEXEC_EXECUTABLE} $np --oversubscribe $<TARGET_FILE:lstm_lm> ${_lm_pp} --log lm_pp/$name.csv \"$@\" > lm_pp/$name.out; b=$(tail -n1 lm_pp/$name.csv | cut -d, -f3,5); echo \"one process $a, $name $b\"; ${_lm_close}; done && grep -q 'Pipeline: 2 stages x 2 replicas, 2 micro-batches per step, 1f1b' lm_pp/np4.out && test -s lm_pp/ck/lstm_lm.ckpt && $<TARGET_FILE:lstm_lm> ${_lm_small} --layers 2 --max-steps 6 --checkpoint-dir lm_pp/ck --resume auto --reshard | grep -q 'Resumed from'")
  set_tests_properties(example.lstm_lm_pipeline PROPERTIES LABELS "examples;dist" TIMEOUT 600 SKIP_RETURN_CODE 77)
  if(EMBER_SANITIZE)  # OpenMPI's own allocations outlive MPI_Finalize (tests/dist/dist_tests.cmake)
    set_tests_properties(example.lstm_lm_pipeline PROPERTIES ENVIRONMENT "${EMBER_DIST_SANITIZER_ENV}")
  endif()
endif()
