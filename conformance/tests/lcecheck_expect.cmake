# lcecheck_expect.cmake — runs one lcecheck verb and checks its exit status AND its output (ctest
# alone checks one or the other): a mutant must fail by name with exit 1, identical subjects must
# pass with exit 0. With -DSKIPPABLE=1 (the GPU tests), exit 77 (no GPU) prints LCE-SKIPPED, which
# those tests declare as their SKIP_REGULAR_EXPRESSION (a script cannot exit 77 itself); without it,
# 77 is a failure like any other unexpected status. -DSKIP_ON_RC=n does the same for exit n (a test
# of the no-GPU path passes SKIP_ON_RC=0: on a GPU machine the verb simply runs).
#   cmake -DLCECHECK=path -DARGS="compare;--subjects;A,B;..." -DEXPECT_RC=n -DEXPECT_REGEX=re [-DSKIPPABLE=1 | -DSKIP_ON_RC=n]
#         [-DEXPECT_STDERR_REGEX=re] [-DEXPECT_JSON_STATUS=usage|skipped|error] -P lcecheck_expect.cmake
# EXPECT_REGEX matches stdout, EXPECT_STDERR_REGEX stderr. EXPECT_JSON_STATUS (with --json in ARGS):
# stdout is exactly one JSON object on one line, whose "status" is that and whose "exit" is the exit
# status (cli_fail's object).
execute_process(COMMAND ${LCECHECK} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(SKIPPABLE)
  set(SKIP_ON_RC 77)
endif()
if(DEFINED SKIP_ON_RC AND rc STREQUAL SKIP_ON_RC AND NOT EXPECT_RC STREQUAL SKIP_ON_RC)
  message("LCE-SKIPPED: lcecheck ${ARGS} exited ${rc}: the test does not apply on this machine")
  return()
endif()
if(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "lcecheck ${ARGS}: exit ${rc}, expected ${EXPECT_RC}")
endif()
if(NOT out MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "lcecheck ${ARGS}: output does not match '${EXPECT_REGEX}'")
endif()
if(DEFINED EXPECT_STDERR_REGEX AND NOT err MATCHES "${EXPECT_STDERR_REGEX}")
  message(FATAL_ERROR "lcecheck ${ARGS}: stderr does not match '${EXPECT_STDERR_REGEX}'")
endif()
if(DEFINED EXPECT_JSON_STATUS)
  # One object: a JSON object printed by lcecheck holds no raw newline (strings escape it).
  if(NOT out MATCHES "^{[^\n]*}\n$")
    message(FATAL_ERROR "lcecheck ${ARGS}: stdout is not exactly one JSON object on one line:\n${out}")
  endif()
  string(JSON status ERROR_VARIABLE bad GET "${out}" status)
  string(JSON exit_status ERROR_VARIABLE bad_exit GET "${out}" exit)
  if(bad OR bad_exit OR NOT status STREQUAL EXPECT_JSON_STATUS OR NOT exit_status STREQUAL rc)
    message(FATAL_ERROR "lcecheck ${ARGS}: JSON status '${status}' exit '${exit_status}', "
                        "expected '${EXPECT_JSON_STATUS}' and ${rc}")
  endif()
endif()
