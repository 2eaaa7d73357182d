# Installation (docs/install.md): `cmake --install <build> --prefix P` or `make install PREFIX=P`.
#
#   include/mscclpp/*.h              the C API
#   include/mscclpp/nccl/nccl.h      the NCCL API of libmscclpp_nccl.so (its own folder, so that it
#                                    never shadows a real NCCL's include/nccl.h)
#   lib/libmscclpp.so[.0[.1.0]]      shared library (public API only)
#   lib/libmscclpp.a                 static library (target mscclpp_static)
#   lib/libmscclpp_nccl.so           NCCL-compatible library (soname libnccl.so.2)
#   lib/nccl/libnccl.so[.2]          links to it, for LD_LIBRARY_PATH=<prefix>/lib/nccl
#   lib/pkgconfig/mscclpp.pc, mscclpp_nccl.pc
#   lib/cmake/mscclpp/               mscclppConfig.cmake: mscclpp::mscclpp, mscclpp::mscclpp_static,
#                                    mscclpp::nccl
#   bin/mscclpp-*                    tools (statically linked)
#   share/mscclpp/algo.tsv           selection table: the library and the tools read
#                                    <their folder>/../share/mscclpp/algo.tsv (src/algo/select.c)
# Tests and examples are not installed.

# A wheel (pip install ., python/CMakeLists.txt) has the libraries in mscclpp/lib: the table goes
# where they look for it. Nothing else of the rules below belongs in a wheel.
if(SKBUILD)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/tuning/ DESTINATION mscclpp/share/mscclpp)
  return()
endif()

include(CMakePackageConfigHelpers)
set(MSCCLPP_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/mscclpp)

# Headers.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mscclpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_SOURCE_DIR}/nccl/include/nccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mscclpp/nccl)

# Libraries, exported as mscclpp::mscclpp, mscclpp::mscclpp_static and mscclpp::nccl.
set_target_properties(mscclpp_nccl PROPERTIES EXPORT_NAME nccl)
install(TARGETS mscclpp mscclpp_static mscclpp_nccl EXPORT mscclppTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# lib/nccl/libnccl.so.2 -> ../libmscclpp_nccl.so and libnccl.so -> libnccl.so.2, as in the build
# tree (nccl/CMakeLists.txt makes them; installing a link copies the link).
install(FILES ${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/nccl/libnccl.so.2 ${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/nccl/libnccl.so
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/nccl)

# Tools: every executable tools/CMakeLists.txt defines, and mscclpp-tune (Python).
get_property(_mscclpp_tools DIRECTORY ${PROJECT_SOURCE_DIR}/tools PROPERTY BUILDSYSTEM_TARGETS)
foreach(_t ${_mscclpp_tools})
  get_target_property(_type ${_t} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    install(TARGETS ${_t} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/mscclpp_tune.py DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME mscclpp-tune)

# Tuning tables.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tuning/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mscclpp)

# pkg-config files. What the static library needs goes to Requires.private (jansson, libcrypto,
# expat: they ship .pc files; -lexpat when expat's does not exist) and Libs.private, so that
# `pkg-config --static --libs mscclpp` prints the whole static link line.
find_package(PkgConfig REQUIRED)
pkg_check_modules(MSCCLPP_EXPAT_PC QUIET expat)
set(MSCCLPP_PC_REQUIRES_PRIVATE "jansson libcrypto")
set(MSCCLPP_PC_LIBS_PRIVATE "")
if(MSCCLPP_HAVE_LIBFABRIC)
  # The net transport: libfabric's shared library only (-lfabric); its .pc's Libs.private names the
  # providers' libraries a static libfabric would need (psm2, efa, ...), which Debian does not ship.
  pkg_check_modules(MSCCLPP_FABRIC_PC QUIET libfabric)
  set(_fabric_ldflags "")
  foreach(_dir ${MSCCLPP_FABRIC_PC_LIBRARY_DIRS}) # -L only where the linker does not look anyway
    if(NOT _dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
      string(APPEND _fabric_ldflags " -L${_dir}")
    endif()
  endforeach()
  string(APPEND MSCCLPP_PC_LIBS_PRIVATE "${_fabric_ldflags} -lfabric")
endif()
if(MSCCLPP_EXPAT_PC_FOUND)
  string(APPEND MSCCLPP_PC_REQUIRES_PRIVATE " expat")
else()
  string(APPEND MSCCLPP_PC_LIBS_PRIVATE " -lexpat")
endif()
if(MSCCLPP_HAVE_CUDA)
  # The CUDA runtime statically, and the C++ runtime nvcc's host code needs (src/CMakeLists.txt).
  string(APPEND MSCCLPP_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lstdc++")
endif()
if(CMAKE_THREAD_LIBS_INIT)
  string(APPEND MSCCLPP_PC_LIBS_PRIVATE " ${CMAKE_THREAD_LIBS_INIT}")
else()
  string(APPEND MSCCLPP_PC_LIBS_PRIVATE " -lpthread")
endif()
string(APPEND MSCCLPP_PC_LIBS_PRIVATE " -ldl -lrt -lm")
string(STRIP "${MSCCLPP_PC_LIBS_PRIVATE}" MSCCLPP_PC_LIBS_PRIVATE)
# The .pc files name absolute paths of the prefix given at install time (`--prefix` may differ
# from CMAKE_INSTALL_PREFIX): cmake/pkgconfig.cmake writes them then.
install(CODE "
set(MSCCLPP_PC_SOURCE_DIR \"${CMAKE_CURRENT_LIST_DIR}\")
set(MSCCLPP_PC_BINARY_DIR \"${CMAKE_BINARY_DIR}/pkgconfig\")
set(MSCCLPP_PC_VERSION \"${PROJECT_VERSION}\")
set(MSCCLPP_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
set(MSCCLPP_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
set(MSCCLPP_PC_REQUIRES_PRIVATE \"${MSCCLPP_PC_REQUIRES_PRIVATE}\")
set(MSCCLPP_PC_LIBS_PRIVATE \"${MSCCLPP_PC_LIBS_PRIVATE}\")
include(\"${CMAKE_CURRENT_LIST_DIR}/pkgconfig.cmake\")
")
install(FILES ${CMAKE_BINARY_DIR}/pkgconfig/mscclpp.pc ${CMAKE_BINARY_DIR}/pkgconfig/mscclpp_nccl.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The CMake package: find_package(mscclpp CONFIG).
install(EXPORT mscclppTargets NAMESPACE mscclpp:: DESTINATION ${MSCCLPP_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/mscclppConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/cmake/mscclppConfig.cmake
                              INSTALL_DESTINATION ${MSCCLPP_INSTALL_CMAKEDIR})
# 0.x: the soname's major version (0) is what a program depends on.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/mscclppConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/mscclppConfig.cmake ${CMAKE_BINARY_DIR}/cmake/mscclppConfigVersion.cmake
        DESTINATION ${MSCCLPP_INSTALL_CMAKEDIR})
