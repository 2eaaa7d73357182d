# Unit tests of the built-in collectives' selection table.
set(_algo_dir ${CMAKE_CURRENT_LIST_DIR})
mpp_unit_test(algo_select ${_algo_dir}/algo_select.c)
target_compile_definitions(algo_select PRIVATE MPP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
mpp_unit_test(algo_machine ${_algo_dir}/algo_machine.c)
