# lce_cuda_target(<target>) — the settings every CUDA target of lcecheck shares: C++17, the shared
# CUDA runtime, cuBLAS, and the host compiler's warnings (the top level's warning flags reach C
# sources only, through a generator expression, so nvcc never sees gcc-only flags).
function(lce_cuda_target tgt)
  target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  set_target_properties(${tgt} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
                                          CUDA_RUNTIME_LIBRARY Shared)
  target_link_libraries(${tgt} PUBLIC CUDA::cudart CUDA::cublas)
endfunction()
