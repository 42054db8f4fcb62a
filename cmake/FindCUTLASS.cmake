# FindCUTLASS.cmake — the CUTLASS/CuTe C++ headers (header-only), for fused-sm90 (fused/cuda/cuda.cmake).
# They are never in the tree: scripts/setup.sh extracts the include directory of the PyPI package
# nvidia-cutlass 4.2.0.0 (cutlass_library/source/include) into .deps/cutlass-4.2.0.0/include.
#
#   CUTLASS_INCLUDE_DIR  cache variable: the directory holding cute/tensor.hpp and cutlass/cutlass.h
#                        (searched in .deps/cutlass-*/include and $ENV{CUTLASS_DIR}/include when unset)
#   CUTLASS_FOUND, CUTLASS_VERSION; imported target CUTLASS::CUTLASS (INTERFACE, system include)
# The version lives in one place, scripts/setup.sh: whichever .deps/cutlass-<version> it extracted.
file(GLOB _cutlass_deps LIST_DIRECTORIES true "${PROJECT_SOURCE_DIR}/.deps/cutlass-*/include")
find_path(CUTLASS_INCLUDE_DIR
  NAMES cute/tensor.hpp cutlass/gemm/collective/builders/sm90_gmma_builder.inl
  HINTS ${_cutlass_deps} $ENV{CUTLASS_DIR}/include
  DOC "CUTLASS include directory (cute/ and cutlass/)")
if(CUTLASS_INCLUDE_DIR AND EXISTS "${CUTLASS_INCLUDE_DIR}/cutlass/version.h")
  file(STRINGS "${CUTLASS_INCLUDE_DIR}/cutlass/version.h" _v REGEX "#define CUTLASS_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*CUTLASS_MAJOR ([0-9]+).*" "\\1" _major "${_v}")
  string(REGEX REPLACE ".*CUTLASS_MINOR ([0-9]+).*" "\\1" _minor "${_v}")
  string(REGEX REPLACE ".*CUTLASS_PATCH ([0-9]+).*" "\\1" _patch "${_v}")
  set(CUTLASS_VERSION "${_major}.${_minor}.${_patch}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUTLASS REQUIRED_VARS CUTLASS_INCLUDE_DIR VERSION_VAR CUTLASS_VERSION)
if(CUTLASS_FOUND AND NOT TARGET CUTLASS::CUTLASS)
  add_library(CUTLASS::CUTLASS INTERFACE IMPORTED)
  set_target_properties(CUTLASS::CUTLASS PROPERTIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${CUTLASS_INCLUDE_DIR}"
                                                    INTERFACE_INCLUDE_DIRECTORIES "${CUTLASS_INCLUDE_DIR}")
endif()
mark_as_advanced(CUTLASS_INCLUDE_DIR)
