# GPU tests of the built-in collectives (label gpu; 77 = skipped without enough GPUs): every
# collective x datatype x operator x in/out of place at odd sizes, per algorithm family, on 2 and 4
# ranks (the 4-rank runs skip on a 2-GPU machine), and the zero-copy and staged families and the table on 8.
# C, public API plus src/algo/verify.h.
set(GDIR ${CMAKE_CURRENT_LIST_DIR})
foreach(variant ll ll2 bulk1 bulk table zc zcg zcw zcwc zcr st stg stp stn stm stpm)
  set(_ranks 2 4)
  if(variant STREQUAL "table" OR variant STREQUAL "zc" OR variant STREQUAL "st")
    list(APPEND _ranks 8)
  endif()
  foreach(n ${_ranks})
    mpp_gpu_test(coll_gpu NRANKS ${n} TESTNAME coll_gpu_${variant}_n${n} ARGS ${variant} SOURCES ${GDIR}/coll_gpu.c)
  endforeach()
endforeach()
# GPU ranks on 2 stand-in hosts (MSCCLPP_HOSTID; src/algo/gpu/xhost.h): 2 hosts x 2 GPUs through the
# table (hierarchical: NVLink inside, host pipes between) eager and captured, the host family
# forced on interleaved hosts, and 4 KiB host pieces; 2 hosts x 1 GPU (one rank per host).
foreach(variant xh xhg xhh xhp)
  mpp_gpu_test(coll_gpu NRANKS 4 TESTNAME coll_gpu_${variant}_n4 ARGS ${variant} SOURCES ${GDIR}/coll_gpu.c)
endforeach()
mpp_gpu_test(coll_gpu NRANKS 2 TESTNAME coll_gpu_xh_n2 ARGS xh SOURCES ${GDIR}/coll_gpu.c)
# A rank of host 1 exits mid-run: every survivor's calls fail within a bound (xhost_kill.c).
mpp_gpu_test(xhost_kill NRANKS 4 SOURCES ${GDIR}/xhost_kill.c)
set_tests_properties(xhost_kill_n4 PROPERTIES TIMEOUT 90 ENVIRONMENT "MSCCLPP_DEVICE_WAIT_TIMEOUT=5000;MSCCLPP_LOG_LEVEL=warn")
