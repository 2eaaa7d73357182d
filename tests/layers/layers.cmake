# The one-way layering rule of docs/architecture.md (tests/layers/check_layers.py): every #include
# of src/ and every symbol one library object takes from another must point down the stack. Reads
# the sources and the library's objects of this build, so it runs after the build.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME layers COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_layers.py
           ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR}/src/CMakeFiles/mscclpp_obj.dir)
  add_test(NAME layers_selftest COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_layers.py --self-test)
  set_tests_properties(layers layers_selftest PROPERTIES LABELS unit TIMEOUT 120)
endif()
