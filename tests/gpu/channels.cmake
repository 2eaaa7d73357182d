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
  # Port channels (put, signal, flush, the FIFO stress) between GPU ranks of different stand-in
  # hosts (GT_NET=1: MSCCLPP_HOSTID per rank) over the net transport: staged through pinned host
  # rings (tcp grants no FI_HMEM), and under FI_HMEM through the shm provider where it grants it.
  foreach(n 2 4)
    mpp_gpu_test(gpu_portchan NRANKS ${n} TESTNAME gpu_portchan_net_n${n} ARGS 300 SOURCES ${GDIR}/gpu_portchan.cu)
    set_tests_properties(gpu_portchan_net_n${n} PROPERTIES ENVIRONMENT "GT_NET=1;MSCCLPP_NET_TRANSPORT=on")
  endforeach()
  mpp_gpu_test(gpu_portchan NRANKS 2 TESTNAME gpu_portchan_net_hmem_n2 ARGS 300 SOURCES ${GDIR}/gpu_portchan.cu)
  set_tests_properties(gpu_portchan_net_hmem_n2 PROPERTIES ENVIRONMENT
                       "GT_NET=1;MSCCLPP_NET_TRANSPORT=on;MSCCLPP_NET_GPU_MEM=auto;MSCCLPP_NET_PROVIDER=shm")
endif()
