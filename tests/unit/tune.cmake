# tools/mscclpp_tune.py: rule making on made-up times and one real run on 2 CPU ranks whose rules
# the library must load (tests/unit/tune_rules.py). Needs python3.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME tune_rules COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/unit/tune_rules.py
           $<TARGET_FILE_DIR:mscclpp-perf> ${PROJECT_SOURCE_DIR})
  set_tests_properties(tune_rules PROPERTIES LABELS unit TIMEOUT 300)
endif()
