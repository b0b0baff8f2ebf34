# Runs EXE with ARGS (a ;-list) and checks its exit status, that stdout+stderr match REGEX and,
# when NOT_REGEX is given, that they do not match it.
execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL STATUS)
  message(FATAL_ERROR "exit status ${status}, expected ${STATUS}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED NOT_REGEX AND "${out}${err}" MATCHES "${NOT_REGEX}")
  message(FATAL_ERROR "output matches '${NOT_REGEX}', which it must not\nstdout:\n${out}\nstderr:\n${err}")
endif()
