# Proxy service and channels between CPU ranks: port channels pushed by host threads and served by
# the proxy over shm and tcp; memory channels (semaphores, put/get, LL packets) over shared memory;
# the seed API's device connections; switch channels through their host functions.
set(PDIR ${CMAKE_CURRENT_LIST_DIR})
mpp_mp_test(proxy_cpu NRANKS 2 TESTNAME proxy_cpu_shm ARGS shm 20 SOURCES ${PDIR}/proxy_cpu.c)
mpp_mp_test(proxy_cpu NRANKS 2 TESTNAME proxy_cpu_tcp ARGS tcp 20 SOURCES ${PDIR}/proxy_cpu.c)
mpp_mp_test(memchan_cpu NRANKS 2 TESTNAME memchan_cpu_shm ARGS 2000 SOURCES ${PDIR}/memchan_cpu.c)
mpp_mp_test(devconn_cpu NRANKS 2 TESTNAME devconn_cpu_shm_n2 ARGS shm SOURCES ${PDIR}/devconn_cpu.c)
mpp_mp_test(devconn_cpu NRANKS 3 TESTNAME devconn_cpu_tcp_n3 ARGS tcp SOURCES ${PDIR}/devconn_cpu.c)
mpp_mp_test(devconn_cpu NRANKS 4 TESTNAME devconn_cpu_shm_n4 ARGS shm SOURCES ${PDIR}/devconn_cpu.c)
# Switch channels between CPU ranks (shm mappings) through the host functions.
foreach(n 2 3 4)
  mpp_mp_test(switchchan_cpu NRANKS ${n} SOURCES ${PDIR}/switchchan_cpu.c)
endforeach()
