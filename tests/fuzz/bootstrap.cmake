# Fuzzing the bootstrap's wire decoders (label fuzz). By default fuzz_driver.c runs the target for
# a fixed time with random and mutated seed inputs, so any compiler works. Configure with
# CC=clang -DMSCCLPP_LIBFUZZER=ON to build it with libFuzzer instead (wire.c compiled into the
# target so that libFuzzer sees its coverage); the ctest then runs libFuzzer for 3 seconds.
option(MSCCLPP_LIBFUZZER "Build fuzz targets with clang's -fsanitize=fuzzer" OFF)
set(_fuzz_dir ${CMAKE_CURRENT_LIST_DIR})
if(MSCCLPP_LIBFUZZER)
  add_executable(fuzz_wire ${_fuzz_dir}/fuzz_wire.c ${PROJECT_SOURCE_DIR}/src/bootstrap/wire.c)
  target_compile_options(fuzz_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_wire PRIVATE mscclpp_static)
  add_test(NAME fuzz_wire COMMAND fuzz_wire -max_total_time=3)
else()
  mpp_test_target(fuzz_wire ${_fuzz_dir}/fuzz_wire.c ${_fuzz_dir}/fuzz_driver.c)
  add_test(NAME fuzz_wire COMMAND fuzz_wire 3)
endif()
set_tests_properties(fuzz_wire PROPERTIES LABELS fuzz TIMEOUT 120 ENVIRONMENT MSCCLPP_LOG_LEVEL=none)
