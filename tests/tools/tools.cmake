# The command-line tools as users meet them (tests/tools/cli_tools.py: --help, bad options and
# values, sizes, nccl-tests command lines, the parameter table and its doc, pictures, mscclpp-tune).
# CPU ranks only. The plans of tests/plans (generated there) serve mscclpp-plan's checks.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  foreach(area help errors sizes perf params draw tune)
    add_test(NAME tools_${area}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/cli_tools.py ${area} $<TARGET_FILE_DIR:mscclpp-plan>
                     ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/plans)
    set_tests_properties(tools_${area} PROPERTIES LABELS unit TIMEOUT 300)
  endforeach()
  # mscclpp-plan run and draw need the generated plans (tests/plans/plans.cmake)
  set_tests_properties(tools_errors tools_sizes tools_draw PROPERTIES FIXTURES_REQUIRED plan_corpus)
endif()

# mscclpp-perf's NCCL side (tools/perf/perf_nccl.c) on stand-in functions: --nccl-symm's window
# calls and their order, a library without them, a missing required function.
mpp_unit_test(perf_nccl_symm ${CMAKE_CURRENT_LIST_DIR}/perf_nccl_symm.c ${PROJECT_SOURCE_DIR}/tools/perf/perf_nccl.c)
target_include_directories(perf_nccl_symm PRIVATE ${PROJECT_SOURCE_DIR}/tools/perf)
