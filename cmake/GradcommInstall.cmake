# cmake --install lays out the header, the library, a CMake package
# (find_package(gradcomm) -> gradcomm::gradcomm) and a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS gradcomm EXPORT gradcommTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/gradcomm
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

set(GRADCOMM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gradcomm)
install(EXPORT gradcommTargets NAMESPACE gradcomm:: DESTINATION ${GRADCOMM_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gradcommConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gradcommConfig.cmake INSTALL_DESTINATION ${GRADCOMM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gradcommConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gradcommConfig.cmake
  ${PROJECT_BINARY_DIR}/gradcommConfigVersion.cmake DESTINATION ${GRADCOMM_CMAKE_DIR})

file(RELATIVE_PATH GRADCOMM_PC_TO_PREFIX
  /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/gradcomm.pc.in ${PROJECT_BINARY_DIR}/gradcomm.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gradcomm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
