# The installed CMake package: EmberConfig.cmake, its version file and EmberTargets.cmake with
# every library that went through ember_install_library(). Included once, after all libraries.

include(CMakePackageConfigHelpers)

set(EMBER_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Ember)
get_property(EMBER_EXPORTED_TARGETS GLOBAL PROPERTY EMBER_EXPORTED_TARGETS)
list(JOIN EMBER_EXPORTED_TARGETS " " EMBER_EXPORTED_TARGETS)
get_property(EMBER_FIND_DEPENDENCIES GLOBAL PROPERTY EMBER_PACKAGE_DEPENDENCIES)
list(JOIN EMBER_FIND_DEPENDENCIES "\n" EMBER_FIND_DEPENDENCIES)

install(EXPORT EmberTargets NAMESPACE Ember:: DESTINATION ${EMBER_CMAKE_INSTALL_DIR} FILE EmberTargets.cmake)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/EmberConfig.cmake.in
  ${PROJECT_BINARY_DIR}/EmberConfig.cmake INSTALL_DESTINATION ${EMBER_CMAKE_INSTALL_DIR})
# 0.x: a minor release may break the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/EmberConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/EmberConfig.cmake ${PROJECT_BINARY_DIR}/EmberConfigVersion.cmake
  DESTINATION ${EMBER_CMAKE_INSTALL_DIR})

install(FILES ${PROJECT_SOURCE_DIR}/include/ember/ember.h ${EMBER_GENERATED_INCLUDE_DIR}/ember/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember)
