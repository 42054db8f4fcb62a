# lce_add_test(<name> SOURCES ... LIBS ... LABELS ... [ARGS ...])
# One executable per test under build/tests/, registered with ctest under its labels; exit code 77
# means "skipped" (e.g. no GPU).
function(lce_add_test NAME)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${NAME} ${T_SOURCES})
  target_link_libraries(${NAME} PRIVATE ${T_LIBS})
  set_target_properties(${NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  add_test(NAME ${NAME} COMMAND ${NAME} ${T_ARGS})
  set_tests_properties(${NAME} PROPERTIES LABELS "${T_LABELS}" SKIP_RETURN_CODE 77)
endfunction()
