# FindMPFR — GNU MPFR. Defines MPFR_FOUND, MPFR_VERSION and the imported target MPFR::MPFR
# (which links GMP::GMP). Honors MPFR_ROOT (or CMAKE_PREFIX_PATH).
find_package(GMP QUIET)
find_path(MPFR_INCLUDE_DIR NAMES mpfr.h PATH_SUFFIXES include)
find_library(MPFR_LIBRARY NAMES mpfr PATH_SUFFIXES lib lib/x86_64-linux-gnu)
if(MPFR_INCLUDE_DIR AND EXISTS "${MPFR_INCLUDE_DIR}/mpfr.h")
  file(STRINGS "${MPFR_INCLUDE_DIR}/mpfr.h" _mpfr_ver REGEX "^#define MPFR_VERSION_STRING")
  string(REGEX REPLACE ".*\"([^\"]+)\".*" "\\1" MPFR_VERSION "${_mpfr_ver}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MPFR REQUIRED_VARS MPFR_LIBRARY MPFR_INCLUDE_DIR GMP_FOUND
                                  VERSION_VAR MPFR_VERSION)
if(MPFR_FOUND AND NOT TARGET MPFR::MPFR)
  add_library(MPFR::MPFR UNKNOWN IMPORTED)
  set_target_properties(MPFR::MPFR PROPERTIES IMPORTED_LOCATION "${MPFR_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${MPFR_INCLUDE_DIR}"
                                              INTERFACE_LINK_LIBRARIES GMP::GMP)
endif()
mark_as_advanced(MPFR_INCLUDE_DIR MPFR_LIBRARY)
