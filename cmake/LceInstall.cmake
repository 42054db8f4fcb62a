# LceInstall.cmake — what an outside project gets from find_package(lcecheck CONFIG):
#   lcecheck::subject   INTERFACE: the public plugin header <lcecheck/lcecheck_subject.h>
#   lcecheck::lcecheck  the lcecheck executable (imported), to run `check --subject plugin:...`
# from an install prefix (cmake --install) or from this build tree (-Dlcecheck_DIR=<build dir>).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(lcecheck_subject INTERFACE)
add_library(lcecheck::subject ALIAS lcecheck_subject)
target_include_directories(lcecheck_subject INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(lcecheck_subject PROPERTIES EXPORT_NAME subject)

# The installed executable keeps finding the shared libraries it was linked with (MPFR, CUDA).
set_target_properties(lcecheck PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
set(LCE_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/lcecheck)
install(TARGETS lcecheck lcecheck_subject EXPORT lcecheckTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/lcecheck DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT lcecheckTargets NAMESPACE lcecheck:: DESTINATION ${LCE_CMAKE_INSTALL_DIR})
export(EXPORT lcecheckTargets NAMESPACE lcecheck:: FILE ${PROJECT_BINARY_DIR}/lcecheckTargets.cmake)

# One config file serves both places: it includes the targets file beside it.
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/lcecheckConfig.cmake.in ${PROJECT_BINARY_DIR}/lcecheckConfig.cmake
                              INSTALL_DESTINATION ${LCE_CMAKE_INSTALL_DIR})
# 0.x: a minor version may change the plugin ABI (the header's LCECHECK_SUBJECT_ABI_VERSION says).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/lcecheckConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/lcecheckConfig.cmake ${PROJECT_BINARY_DIR}/lcecheckConfigVersion.cmake
        DESTINATION ${LCE_CMAKE_INSTALL_DIR})
