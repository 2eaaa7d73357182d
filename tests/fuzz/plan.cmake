# Fuzzing the plan loader and validator (label fuzz), with the same driver as fuzz_wire: a fixed
# time of random and mutated seed plans (or libFuzzer with -DMSCCLPP_LIBFUZZER=ON).
set(_fuzzp_dir ${CMAKE_CURRENT_LIST_DIR})
if(MSCCLPP_LIBFUZZER)
  add_executable(fuzz_plan ${_fuzzp_dir}/fuzz_plan.c)
  target_compile_options(fuzz_plan PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_plan PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_plan PRIVATE mscclpp_static)
  add_test(NAME fuzz_plan COMMAND fuzz_plan -max_total_time=3)
else()
  mpp_test_target(fuzz_plan ${_fuzzp_dir}/fuzz_plan.c ${_fuzzp_dir}/fuzz_driver.c)
  add_test(NAME fuzz_plan COMMAND fuzz_plan 3)
endif()
set_tests_properties(fuzz_plan PROPERTIES LABELS fuzz TIMEOUT 120 ENVIRONMENT MSCCLPP_LOG_LEVEL=none)
