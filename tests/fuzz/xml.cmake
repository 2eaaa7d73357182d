# Fuzzing the MSCCL XML reader and converter (label fuzz), as bootstrap.cmake does for the wire
# decoders: fuzz_driver.c by default, libFuzzer with -DMSCCLPP_LIBFUZZER=ON (clang).
set(_fuzz_xml_dir ${CMAKE_CURRENT_LIST_DIR})
if(MSCCLPP_LIBFUZZER)
  add_executable(fuzz_xml ${_fuzz_xml_dir}/fuzz_xml.c)
  target_compile_options(fuzz_xml PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_xml PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_xml PRIVATE mscclpp_static)
  add_test(NAME fuzz_xml COMMAND fuzz_xml -max_total_time=3)
else()
  mpp_test_target(fuzz_xml ${_fuzz_xml_dir}/fuzz_xml.c ${_fuzz_xml_dir}/fuzz_driver.c)
  add_test(NAME fuzz_xml COMMAND fuzz_xml 3)
endif()
set_tests_properties(fuzz_xml PROPERTIES LABELS fuzz TIMEOUT 120 ENVIRONMENT MSCCLPP_LOG_LEVEL=none)
