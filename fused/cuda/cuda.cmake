# fused/cuda/cuda.cmake — the fused-cuda and unfused-cuda subjects and the GPU mutants; included by
# fused/CMakeLists.txt where the CUDA language is enabled. Compiles on machines without a GPU (CI);
# their tests (fused/tests, conformance/tests) exit 77 there.
#
#   lce_fused_cuda          production: fused_cuda.cu (subject "fused-cuda"), the epilogue kernels,
#                           the bench; linked into lce_fused; its consumers compile with LCE_WITH_CUDA
#                           (the registry lists fused-cuda, the CLI has `bench`); unfused_cuda.cu
#                           (subject "unfused-cuda": the same driver, one GEMM per gradient)
#   lce_mutant_cuda_<name>  fused_cuda.cu compiled again with -DLCE_MUTANT_CUDA_<SWITCH>=1: subject
#                           "mutant-cuda/<name>", golden class "fused-cuda"
#   lce_fused_cuda_mutants  the GPU mutants; linked into lce_fused_mutants only (LCE_BUILD_MUTANTS)
#   lce_fused_sm90          with CUTLASS's headers (CUTLASS_FOUND): fused_sm90.cu (subject "fused-sm90")
#                           and fused_sm90_gemm.cu, the only CUTLASS translation unit, for sm_90a;
#                           linked into lce_fused; its consumers compile with LCE_WITH_SM90
#   lce_mutant_sm90_<name>  fused_sm90.cu compiled again with -DLCE_MUTANT_SM90_<SWITCH>=1 (and, for a bug
#                           in the GEMM's epilogue, fused_sm90_gemm.cu too, both with LCE_FS_NS: a
#                           namespace of its own): subject "mutant-sm90/<name>", golden class "fused-cuda"
#   lce_fused_sm90_mutants  those; linked into lce_fused_mutants only. Their names join the GPU mutants'
#                           (LCE_CUDA_MUTANT_NAMES: conformance/tests registers a check of each)
# Every CUDA target here: lce_cuda_target's settings, the fused/ headers, the checked-call header.
function(lce_fused_cuda_target tgt)
  lce_cuda_target(${tgt})
  target_include_directories(${tgt} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/cuda ${CMAKE_CURRENT_SOURCE_DIR}/subject
                                    PRIVATE ${PROJECT_SOURCE_DIR}/reference/device)
  target_link_libraries(${tgt} PUBLIC lce_case lce_device lce_fused_plan)
  set_property(GLOBAL APPEND PROPERTY LCE_FUSED_CUDA_TARGETS ${tgt})
endfunction()

add_library(lce_fused_cuda STATIC cuda/fused_cuda.cu cuda/fused_cuda_kernels.cu cuda/fused_cuda_bench.cu cuda/unfused_cuda.cu)
lce_fused_cuda_target(lce_fused_cuda)
# LCE_WITH_CUDA reaches every consumer (the registry in lce_fused, the CLI's bench verb, tests).
target_compile_definitions(lce_fused_cuda INTERFACE LCE_WITH_CUDA)
target_link_libraries(lce_fused PUBLIC lce_fused_cuda)

# A fused-sm90 translation unit's target: wgmma and TMA need the architecture-specific sm_90a target;
# CUTLASS needs relaxed constexpr.
function(lce_fused_sm90_target tgt)
  lce_fused_cuda_target(${tgt})
  set_target_properties(${tgt} PROPERTIES CUDA_ARCHITECTURES 90a)
  target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  target_link_libraries(${tgt} PRIVATE CUTLASS::CUTLASS)
endfunction()

if(CUTLASS_FOUND)
  add_library(lce_fused_sm90 STATIC cuda/fused_sm90.cu cuda/fused_sm90_gemm.cu)
  lce_fused_sm90_target(lce_fused_sm90)
  target_link_libraries(lce_fused_sm90 PUBLIC lce_fused_cuda)
  target_compile_definitions(lce_fused_sm90 INTERFACE LCE_WITH_SM90)
  target_link_libraries(lce_fused PUBLIC lce_fused_sm90)
  if(LCE_BUILD_MUTANTS) # the registry compiled again for lce_fused_mutants lists fused-sm90 too
    target_link_libraries(lce_fused_mutants PUBLIC lce_fused_sm90)
  endif()
endif()

# The GPU variants of the two seed-bug mutants and of the mean factor folded into d_logits
# (fused/mutants.txt describes the upstream bugs).
set(LCE_CUDA_MUTANTS "bf16-dhidden-accum:BF16_DHIDDEN_ACCUM" "tied-weight-when-untied:TIED_WEIGHT_WHEN_UNTIED"
                     "mean-factor-in-dlogits:MEAN_FACTOR_IN_DLOGITS")
if(LCE_BUILD_MUTANTS)
  set(_objs "")
  set(_names "")
  foreach(_entry IN LISTS LCE_CUDA_MUTANTS)
    string(REPLACE ":" ";" _pair "${_entry}")
    list(GET _pair 0 _name)
    list(GET _pair 1 _switch)
    string(REPLACE "-" "_" _ident "${_name}")
    add_library(lce_mutant_cuda_${_ident} OBJECT cuda/fused_cuda.cu)
    lce_fused_cuda_target(lce_mutant_cuda_${_ident})
    target_compile_definitions(lce_mutant_cuda_${_ident} PRIVATE LCE_WITH_MUTANTS LCE_MUTANT_CUDA_${_switch}=1)
    list(APPEND _objs $<TARGET_OBJECTS:lce_mutant_cuda_${_ident}>)
    list(APPEND _names mutant-cuda/${_name})
  endforeach()
  add_library(lce_fused_cuda_mutants STATIC ${_objs})
  lce_fused_cuda_target(lce_fused_cuda_mutants)
  target_link_libraries(lce_fused_cuda_mutants PUBLIC lce_fused_cuda)
  target_link_libraries(lce_fused_mutants PUBLIC lce_fused_cuda_mutants)
  set_property(GLOBAL PROPERTY LCE_CUDA_MUTANT_NAMES ${_names})
endif()

# fused-sm90's own seed-bug mutants (fused_sm90.cu's header describes them): name:SWITCH, and :gemm when the
# bug lives in fused_sm90_gemm.cu (a second CUTLASS translation unit to compile: only where needed).
set(LCE_SM90_MUTANTS "bf16-dhidden-accum:BF16_DHIDDEN_ACCUM" "running-max-zero-init:RUNNING_MAX_ZERO_INIT:gemm"
                     "mean-factor-in-dlogits:MEAN_FACTOR_IN_DLOGITS")
if(CUTLASS_FOUND AND LCE_BUILD_MUTANTS)
  set(_objs "")
  set(_names "")
  foreach(_entry IN LISTS LCE_SM90_MUTANTS)
    string(REPLACE ":" ";" _parts "${_entry}")
    list(GET _parts 0 _name)
    list(GET _parts 1 _switch)
    string(REPLACE "-" "_" _ident "${_name}")
    set(_tgt lce_mutant_sm90_${_ident})
    set(_defs LCE_WITH_MUTANTS LCE_MUTANT_SM90_${_switch}=1)
    if("gemm" IN_LIST _parts)
      add_library(${_tgt} OBJECT cuda/fused_sm90.cu cuda/fused_sm90_gemm.cu)
      list(APPEND _defs LCE_FS_NS=lce_fs_mutant_${_ident})
    else()
      add_library(${_tgt} OBJECT cuda/fused_sm90.cu)
    endif()
    lce_fused_sm90_target(${_tgt})
    target_compile_definitions(${_tgt} PRIVATE ${_defs})
    list(APPEND _objs $<TARGET_OBJECTS:${_tgt}>)
    list(APPEND _names mutant-sm90/${_name})
  endforeach()
  add_library(lce_fused_sm90_mutants STATIC ${_objs})
  lce_fused_cuda_target(lce_fused_sm90_mutants)
  target_link_libraries(lce_fused_sm90_mutants PUBLIC lce_fused_sm90)
  target_link_libraries(lce_fused_mutants PUBLIC lce_fused_sm90_mutants)
  set_property(GLOBAL APPEND PROPERTY LCE_CUDA_MUTANT_NAMES ${_names})
endif()

