# lcecheck_expect.cmake — runs one lcecheck verb and checks its exit status AND its output (ctest
# alone checks one or the other): a mutant must fail by name with exit 1, identical subjects must
# pass with exit 0. With -DSKIPPABLE=1 (the GPU tests), exit 77 (no GPU) prints LCE-SKIPPED, which
# those tests declare as their SKIP_REGULAR_EXPRESSION (a script cannot exit 77 itself); without it,
# 77 is a failure like any other unexpected status.
#   cmake -DLCECHECK=path -DARGS="compare;--subjects;A,B;..." -DEXPECT_RC=n -DEXPECT_REGEX=re [-DSKIPPABLE=1]
#         -P lcecheck_expect.cmake
execute_process(COMMAND ${LCECHECK} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(SKIPPABLE AND rc STREQUAL "77" AND NOT EXPECT_RC STREQUAL "77")
  message("LCE-SKIPPED: lcecheck ${ARGS} exited 77 (no GPU)")
  return()
endif()
if(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "lcecheck ${ARGS}: exit ${rc}, expected ${EXPECT_RC}")
endif()
if(NOT out MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "lcecheck ${ARGS}: output does not match '${EXPECT_REGEX}'")
endif()
