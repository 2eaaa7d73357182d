# Run by `cmake --install` (cmake/install.cmake sets the MSCCLPP_PC_* variables): writes mscclpp.pc
# and mscclpp_nccl.pc for the prefix being installed to, into MSCCLPP_PC_BINARY_DIR.
set(prefix "${CMAKE_INSTALL_PREFIX}")
foreach(_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${MSCCLPP_PC_${_dir}}")
    set(_full "${MSCCLPP_PC_${_dir}}")
  else()
    set(_full "\${prefix}/${MSCCLPP_PC_${_dir}}")
  endif()
  string(TOLOWER ${_dir} _var)
  set(${_var} "${_full}")
endforeach()
configure_file(${MSCCLPP_PC_SOURCE_DIR}/mscclpp.pc.in ${MSCCLPP_PC_BINARY_DIR}/mscclpp.pc @ONLY)
configure_file(${MSCCLPP_PC_SOURCE_DIR}/mscclpp_nccl.pc.in ${MSCCLPP_PC_BINARY_DIR}/mscclpp_nccl.pc @ONLY)
