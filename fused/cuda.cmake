# fused/cuda.cmake — the fused-cuda subject, its GPU mutants and its gpu-labelled test; included by
# fused/CMakeLists.txt where a CUDA compiler exists. Compiles on machines without a GPU (CI); the
# test exits 77 there.
#
#   lce_fused_cuda          production: fused_cuda.cu (subject "fused-cuda"), the epilogue kernels,
#                           the bench; linked into lce_fused; its consumers compile with LCE_WITH_CUDA
#                           (the registry lists fused-cuda, the CLI has `bench`); unfused_cuda.cu
#                           (subject "unfused-cuda": the same driver, one GEMM per gradient)
#   lce_mutant_cuda_<name>  fused_cuda.cu compiled again with -DLCE_MUTANT_CUDA_<SWITCH>=1: subject
#                           "mutant-cuda/<name>", golden class "fused-cuda"
#   lce_fused_cuda_mutants  the GPU mutants; linked into lce_fused_mutants only (LCE_BUILD_MUTANTS)
get_property(_lce_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
if(NOT "CUDA" IN_LIST _lce_langs)
  message(STATUS "fused-cuda: the CUDA language is not enabled (sanitizer or fuzzer build): not built")
  return()
endif()
find_package(CUDAToolkit REQUIRED)

# The top level's add_compile_options are gcc flags for C (nvcc rejects -Wall, -fsanitize, ...): the
# CUDA targets drop them and pass their own warnings to the host compiler.
function(lce_cuda_target tgt)
  set_property(TARGET ${tgt} PROPERTY COMPILE_OPTIONS "")
  target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  set_target_properties(${tgt} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
                                          CUDA_RUNTIME_LIBRARY Shared)
  target_include_directories(${tgt} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${tgt} PUBLIC lce_reference CUDA::cudart CUDA::cublas)
  set_property(GLOBAL APPEND PROPERTY LCE_FUSED_CUDA_TARGETS ${tgt})
endfunction()

add_library(lce_fused_cuda STATIC fused_cuda.cu fused_cuda_kernels.cu fused_cuda_bench.cu unfused_cuda.cu)
lce_cuda_target(lce_fused_cuda)
# LCE_WITH_CUDA reaches every consumer (the registry in lce_fused, the CLI's bench verb, tests).
target_compile_definitions(lce_fused_cuda INTERFACE LCE_WITH_CUDA)
target_link_libraries(lce_fused PUBLIC lce_fused_cuda)

# The GPU variants of the two seed-bug mutants (fused/mutants.txt describes the upstream bugs).
set(LCE_CUDA_MUTANTS "bf16-dhidden-accum:BF16_DHIDDEN_ACCUM" "tied-weight-when-untied:TIED_WEIGHT_WHEN_UNTIED")
if(LCE_BUILD_MUTANTS)
  set(_objs "")
  set(_names "")
  foreach(_entry IN LISTS LCE_CUDA_MUTANTS)
    string(REPLACE ":" ";" _pair "${_entry}")
    list(GET _pair 0 _name)
    list(GET _pair 1 _switch)
    string(REPLACE "-" "_" _ident "${_name}")
    add_library(lce_mutant_cuda_${_ident} OBJECT fused_cuda.cu)
    lce_cuda_target(lce_mutant_cuda_${_ident})
    target_compile_definitions(lce_mutant_cuda_${_ident} PRIVATE LCE_WITH_MUTANTS LCE_MUTANT_CUDA_${_switch}=1)
    list(APPEND _objs $<TARGET_OBJECTS:lce_mutant_cuda_${_ident}>)
    list(APPEND _names mutant-cuda/${_name})
  endforeach()
  add_library(lce_fused_cuda_mutants STATIC ${_objs})
  lce_cuda_target(lce_fused_cuda_mutants)
  target_link_libraries(lce_fused_cuda_mutants PUBLIC lce_fused_cuda)
  target_link_libraries(lce_fused_mutants PUBLIC lce_fused_cuda_mutants)
  set_property(GLOBAL PROPERTY LCE_CUDA_MUTANT_NAMES ${_names})
endif()

if(LCE_BUILD_TESTS)
  lce_add_test(test_fused_cuda SOURCES tests/test_fused_cuda.c tests/fused_test_accuracy.c tests/fused_test_util.c
                LIBS lce_subjects LABELS gpu)
  target_include_directories(test_fused_cuda PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests)
  if(LCE_BUILD_MUTANTS)
    target_compile_definitions(test_fused_cuda PRIVATE LCE_WITH_MUTANTS)
  endif()
  # Issue 4's acceptance as ctests (label gpu, skipped without a GPU): fused-cuda passes the default
  # and wide matrices against golden/<arch>/, and each GPU mutant fails cases of the default matrix
  # (exit 1 with failing cases and no errors: an error is not a kill).
  foreach(_matrix default wide)
    add_test(NAME conformance_fused_cuda_${_matrix}
             COMMAND lcecheck check --subject fused-cuda --matrix ${_matrix} --quiet)
    set_tests_properties(conformance_fused_cuda_${_matrix} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  endforeach()
  if(LCE_BUILD_MUTANTS)
    get_property(_cuda_mutants GLOBAL PROPERTY LCE_CUDA_MUTANT_NAMES)
    foreach(_mutant IN LISTS _cuda_mutants)
      string(REGEX REPLACE "[^a-z0-9]+" "_" _test ${_mutant})
      add_test(NAME conformance_${_test}_caught COMMAND ${CMAKE_COMMAND} -DLCECHECK=$<TARGET_FILE:lcecheck>
        "-DARGS=check;--subject;${_mutant};--quiet" -DEXPECT_RC=1 -DSKIPPABLE=1
        "-DEXPECT_REGEX=  fail [1-9][0-9]*  skip [0-9]+  error 0  "
        -P ${PROJECT_SOURCE_DIR}/conformance/tests/lcecheck_expect.cmake)
      set_tests_properties(conformance_${_test}_caught PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "LCE-SKIPPED")
    endforeach()
  endif()
endif()
