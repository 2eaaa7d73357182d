# GPU tests of the channels (label gpu; 77 = skipped without enough GPUs). Registered for 2, 4 and 8
# ranks: each skips on a machine with fewer GPUs. Never use multicast (switch channels are emulated).
if(MSCCLPP_HAVE_CUDA)
  set(GDIR ${CMAKE_CURRENT_LIST_DIR})
  foreach(t gpu_memchan gpu_portchan gpu_switchchan gpu_devconn gpu_bandwidth)
    foreach(n 2 4 8)
      mpp_gpu_test(${t} NRANKS ${n} SOURCES ${GDIR}/${t}.cu)
    endforeach()
    target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --Werror=all-warnings>)
  endforeach()
endif()
