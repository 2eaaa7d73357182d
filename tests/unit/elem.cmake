# Unit tests of the element math (src/elem/): conversions and reductions.
set(_elem_dir ${CMAKE_CURRENT_LIST_DIR})
mpp_unit_test(elem_convert ${_elem_dir}/elem_convert.c)
target_link_libraries(elem_convert PRIVATE m)
mpp_unit_test(elem_reduce ${_elem_dir}/elem_reduce.c)
# The same conversions against CUDA's headers (host code; CUDA builds only, no GPU needed).
if(MSCCLPP_HAVE_CUDA)
  mpp_unit_test(elem_convert_cuda ${_elem_dir}/elem_convert_cuda.cpp)
  target_include_directories(elem_convert_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
endif()
