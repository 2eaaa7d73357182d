# Unit tests of the collectives' building blocks: element conversions, reductions, selection table.
set(_algo_dir ${CMAKE_CURRENT_LIST_DIR})
mpp_unit_test(algo_convert ${_algo_dir}/algo_convert.c)
target_link_libraries(algo_convert PRIVATE m)
mpp_unit_test(algo_reduce ${_algo_dir}/algo_reduce.c)
mpp_unit_test(algo_select ${_algo_dir}/algo_select.c)
target_compile_definitions(algo_select PRIVATE MPP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# The same conversions against CUDA's headers (host code; CUDA builds only, no GPU needed).
if(MSCCLPP_HAVE_CUDA)
  mpp_unit_test(algo_convert_cuda ${_algo_dir}/algo_convert_cuda.cpp)
  target_include_directories(algo_convert_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
endif()
