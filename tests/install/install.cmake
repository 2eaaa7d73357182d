# The installation (cmake/install.cmake; docs/install.md): tests/install/install_test.sh installs
# this build into a temporary prefix and builds and runs programs against it with pkg-config and
# find_package. Label install: `make test` runs it (every label); the sanitizer build leaves it out
# (its libraries need the sanitizer runtimes, which a plain program does not load).
if(NOT MSCCLPP_SANITIZE)
  add_test(NAME install_consumer
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_INSTALL_LIBDIR}
                   ${CMAKE_COMMAND} ${CMAKE_C_COMPILER})
  set_tests_properties(install_consumer PROPERTIES LABELS install TIMEOUT 300)
endif()
