# compare_cli.cmake — runs `lcecheck compare` and checks its exit status AND its output (ctest alone
# checks one or the other): the compare tests must see a mutant fail by name, with exit 1, and two
# identical subjects pass, with exit 0.
#   cmake -DLCECHECK=path -DARGS="compare;--subjects;A,B;..." -DEXPECT_RC=n -DEXPECT_REGEX=re -P compare_cli.cmake
execute_process(COMMAND ${LCECHECK} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "lcecheck ${ARGS}: exit ${rc}, expected ${EXPECT_RC}")
endif()
if(NOT out MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "lcecheck ${ARGS}: output does not match '${EXPECT_REGEX}'")
endif()
