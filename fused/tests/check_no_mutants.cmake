# check_no_mutants.cmake — proves that a production library holds no mutant code.
#   cmake -DNM=<nm> -DPRODUCTION=<liblce_fused.a> [-DMUTANTS=<liblce_fused_mutants.a>]
#         [-DPRODUCTION_SYMBOL=<nm line regex>] [-DMUTANT_SYMBOL=<nm line regex>] -P check_no_mutants.cmake
# Fails when nm lists any symbol containing "mutant" (any case) in the production archive, or when
# its read-only data holds a "mutant/" (or "mutant-cuda/", "mutant-sm90/") subject name. It also fails
# when the production archive does not define PRODUCTION_SYMBOL (default: T lce_fused_host_run), or
# when the mutant archive (if given) shows no MUTANT_SYMBOL (default: T lce_mutant_*_run): either would
# mean the pattern can no longer see what it looks for, and the check would pass vacuously. The GPU
# archives (fused-cuda's, fused-sm90's) are checked with their subjects' data symbols.
foreach(_var NM PRODUCTION)
  if(NOT ${_var})
    message(FATAL_ERROR "check_no_mutants: -D${_var}=... is required")
  endif()
endforeach()

function(lce_nm archive out)
  execute_process(COMMAND ${NM} ${archive} OUTPUT_VARIABLE _syms ERROR_VARIABLE _err RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "check_no_mutants: ${NM} ${archive} failed (${_rc}): ${_err}")
  endif()
  set(${out} "${_syms}" PARENT_SCOPE)
endfunction()

if(NOT PRODUCTION_SYMBOL)
  set(PRODUCTION_SYMBOL "T lce_fused_host_run")
endif()
if(NOT MUTANT_SYMBOL)
  set(MUTANT_SYMBOL "T lce_mutant_[a-z0-9_]+_run")
endif()
lce_nm(${PRODUCTION} _prod)
if(NOT _prod MATCHES "${PRODUCTION_SYMBOL}\n")
  message(FATAL_ERROR "check_no_mutants: ${PRODUCTION} does not define '${PRODUCTION_SYMBOL}': wrong archive?")
endif()
string(REGEX MATCHALL "[^\n]*[Mm][Uu][Tt][Aa][Nn][Tt][^\n]*" _hits "${_prod}")
if(_hits)
  string(REPLACE ";" "\n  " _hits "${_hits}")
  message(FATAL_ERROR "check_no_mutants: mutant symbols in the production library ${PRODUCTION}:\n  ${_hits}")
endif()
file(STRINGS ${PRODUCTION} _names REGEX "mutant[-a-z0-9]*/")
if(_names)
  message(FATAL_ERROR "check_no_mutants: mutant subject names in the production library: ${_names}")
endif()

if(MUTANTS)
  lce_nm(${MUTANTS} _mut)
  if(NOT _mut MATCHES "${MUTANT_SYMBOL}\n")
    message(FATAL_ERROR "check_no_mutants: ${MUTANTS} shows no '${MUTANT_SYMBOL}' symbol: the check is blind")
  endif()
  file(STRINGS ${MUTANTS} _names REGEX "mutant[-a-z0-9]*/")
  if(NOT _names)
    message(FATAL_ERROR "check_no_mutants: ${MUTANTS} holds no mutant/, mutant-cuda/ or mutant-sm90/ name: the string check is blind")
  endif()
endif()
message(STATUS "check_no_mutants: ${PRODUCTION} holds no mutant code")
