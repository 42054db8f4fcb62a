# plugin_example.cmake — builds examples/plugin, an outside CMake project, against this lcecheck:
# from the build tree (-Dlcecheck_DIR=<build dir>) or, with -DFROM_INSTALL=1, from a fresh install
# prefix (cmake --install), where it also runs the example's own ctest, whose lcecheck is the
# imported lcecheck::lcecheck of that prefix.
#   cmake -DSOURCE=<examples/plugin> -DBUILD=<build dir> -DWORK=<scratch dir> -DGENERATOR=<generator>
#         -DC_COMPILER=<compiler> -DCTEST=<ctest> [-DFROM_INSTALL=1] -P plugin_example.cmake
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}\nexited ${rc}:\n${out}${err}")
  endif()
  message("${ARGN}: ok")
endfunction()

if(NOT FROM_INSTALL)
  set(FROM_INSTALL 0)
endif()
file(REMOVE_RECURSE ${WORK})
if(FROM_INSTALL)
  step(${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
  set(_find -DCMAKE_PREFIX_PATH=${WORK}/prefix)
else()
  set(_find -Dlcecheck_DIR=${BUILD})
endif()
step(${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/build -G ${GENERATOR} -DCMAKE_C_COMPILER=${C_COMPILER} ${_find}
     -DBUILD_TESTING=${FROM_INSTALL})
step(${CMAKE_COMMAND} --build ${WORK}/build)
if(FROM_INSTALL)
  step(${CTEST} --test-dir ${WORK}/build --output-on-failure)
endif()
