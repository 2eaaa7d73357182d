# The net transport (libfabric RMA) among CPU ranks on 127.0.0.1: its own tests (transport_net.c)
# and the transport tests and collectives forced onto it. Each skips (77) where the library has no
# libfabric or no provider works (MSCCLPP_NET_TRANSPORT=on makes communicators open it).
set(NDIR ${CMAKE_CURRENT_LIST_DIR})
function(net_test name)
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on;${ARGN}" TIMEOUT 60)
endfunction()
mpp_mp_test(transport_net NRANKS 2 TESTNAME transport_net_data_n2 ARGS data SOURCES ${NDIR}/transport_net.c)
net_test(transport_net_data_n2)
mpp_mp_test(transport_net NRANKS 4 TESTNAME transport_net_data_n4 ARGS data SOURCES ${NDIR}/transport_net.c)
net_test(transport_net_data_n4)
mpp_mp_test(transport_net NRANKS 2 TESTNAME transport_net_kill ARGS kill SOURCES ${NDIR}/transport_net.c)
net_test(transport_net_kill)
mpp_mp_test(transport_net NRANKS 2 TESTNAME transport_net_released ARGS released SOURCES ${NDIR}/transport_net.c)
net_test(transport_net_released)
mpp_mp_test(transport_net NRANKS 2 TESTNAME transport_net_badprov ARGS badprov SOURCES ${NDIR}/transport_net.c)
net_test(transport_net_badprov "MSCCLPP_NET_PROVIDER=no-such-provider")
mpp_mp_test(transport_net NRANKS 2 TESTNAME transport_net_off ARGS off SOURCES ${NDIR}/transport_net.c)
set_tests_properties(transport_net_off PROPERTIES ENVIRONMENT "MSCCLPP_NET_TRANSPORT=off" TIMEOUT 60)
# The shared transport tests over net.
mpp_mp_test(transport_data NRANKS 2 TESTNAME transport_data_net_n2 ARGS net malloc 20 SOURCES ${NDIR}/transport_data.c)
net_test(transport_data_net_n2)
mpp_mp_test(transport_data NRANKS 4 TESTNAME transport_data_net_n4 ARGS net memfd 5 SOURCES ${NDIR}/transport_data.c)
net_test(transport_data_net_n4)
mpp_mp_test(transport_semaphore NRANKS 2 TESTNAME transport_semaphore_net ARGS net SOURCES ${NDIR}/transport_semaphore.c)
net_test(transport_semaphore_net)
mpp_mp_test(transport_flush NRANKS 2 TESTNAME transport_flush_net ARGS net SOURCES ${NDIR}/transport_flush.c)
net_test(transport_flush_net)
mpp_mp_test(transport_peerdeath NRANKS 2 TESTNAME transport_peerdeath_net ARGS net SOURCES ${NDIR}/transport_peerdeath.c)
net_test(transport_peerdeath_net)
# Collectives across two and four "hosts" (MSCCLPP_HOST_ID): Auto takes net between hosts.
mpp_mp_test(coll_check NRANKS 4 TESTNAME coll_net_n4 ARGS -H 2 -d int64,float -o sum,max -n 1,1000
            SOURCES ${NDIR}/coll_check.c)
net_test(coll_net_n4 "MSCCLPP_ALGO_CPU_SCRATCH=8192")
mpp_mp_test(coll_check NRANKS 4 TESTNAME coll_net_hosts4 ARGS -H 4 -c allreduce,allgather,alltoall -d float -o sum
            -n 3,2000 SOURCES ${NDIR}/coll_check.c)
net_test(coll_net_hosts4 "MSCCLPP_ALGO_CPU_SCRATCH=8192")
# Port channels served by the proxy over net (puts, signals, flushes pushed through the FIFO), and
# the seed API's device connections.
mpp_mp_test(proxy_cpu NRANKS 2 TESTNAME proxy_cpu_net ARGS net 20 SOURCES ${NDIR}/proxy_cpu.c)
net_test(proxy_cpu_net)
mpp_mp_test(devconn_cpu NRANKS 3 TESTNAME devconn_cpu_net_n3 ARGS net SOURCES ${NDIR}/devconn_cpu.c)
net_test(devconn_cpu_net_n3)
# The CPU executor's host-memory path (unregistered writes, reads) over net: the bounce buffer.
mpp_mp_test(transport_hostio NRANKS 2 TESTNAME transport_hostio_net ARGS net SOURCES ${NDIR}/transport_hostio.c)
net_test(transport_hostio_net)
# The signal messages' MAC, keys and replay window (one process; net_sig.c needs no libfabric).
mpp_unit_test(transport_netsig ${CMAKE_SOURCE_DIR}/tests/unit/transport_netsig.c)
# Strangers at the endpoint: forged, replayed and unknown-source signals refused and logged
# (rate-limited), guessed memory-region keys write nothing, the real connection carries on.
mpp_mp_test(transport_net_auth NRANKS 3 TESTNAME transport_net_auth SOURCES ${NDIR}/transport_net_auth.c)
net_test(transport_net_auth)
if(MSCCLPP_HAVE_LIBFABRIC) # the stranger's own endpoint: libfabric comes with mscclpp_static
  target_compile_definitions(transport_net_auth PRIVATE MPP_TEST_FABRIC=1)
endif()
# The staged path (GPU memory without FI_HMEM crosses rings of pinned host slots, net_stage.c) on
# CPU ranks: MSCCLPP_NET_STAGE_HOST=1 makes it carry host memory too, so the tests above that
# matter run again with every write staged: sizes 0 B..5 MiB+1 at odd offsets, 2000 writes in
# flight (250 rings' worth) before one signal, 64 MiB, flush visibility, signals after staged data,
# a peer that dies, port channels through the proxy, the CPU executor's host path, collectives.
set(NET_STAGED "MSCCLPP_NET_STAGE_HOST=1")
mpp_mp_test(transport_net NRANKS 2 TESTNAME transport_net_staged_data_n2 ARGS data SOURCES ${NDIR}/transport_net.c)
mpp_mp_test(transport_net NRANKS 4 TESTNAME transport_net_staged_data_n4 ARGS data SOURCES ${NDIR}/transport_net.c)
mpp_mp_test(transport_net NRANKS 2 TESTNAME transport_net_staged_kill ARGS kill SOURCES ${NDIR}/transport_net.c)
mpp_mp_test(transport_data NRANKS 2 TESTNAME transport_data_net_staged_n2 ARGS net malloc 20 SOURCES ${NDIR}/transport_data.c)
mpp_mp_test(transport_semaphore NRANKS 2 TESTNAME transport_semaphore_net_staged ARGS net SOURCES ${NDIR}/transport_semaphore.c)
mpp_mp_test(transport_flush NRANKS 2 TESTNAME transport_flush_net_staged ARGS net SOURCES ${NDIR}/transport_flush.c)
mpp_mp_test(transport_peerdeath NRANKS 2 TESTNAME transport_peerdeath_net_staged ARGS net SOURCES ${NDIR}/transport_peerdeath.c)
mpp_mp_test(proxy_cpu NRANKS 2 TESTNAME proxy_cpu_net_staged ARGS net 20 SOURCES ${NDIR}/proxy_cpu.c)
mpp_mp_test(transport_hostio NRANKS 2 TESTNAME transport_hostio_net_staged ARGS net SOURCES ${NDIR}/transport_hostio.c)
mpp_mp_test(coll_check NRANKS 4 TESTNAME coll_net_staged_hosts4 ARGS -H 4 -c allreduce,allgather,alltoall -d float
            -o sum -n 3,2000 SOURCES ${NDIR}/coll_check.c)
# The owner's checks (a piece out of its region's bounds, a released region, a slot past the ring)
# and a peer that dies while rank 0's writes wait for credits (transport_netstage.c).
mpp_mp_test(transport_netstage NRANKS 2 TESTNAME transport_netstage_bounds ARGS bounds SOURCES ${NDIR}/transport_netstage.c)
mpp_mp_test(transport_netstage NRANKS 2 TESTNAME transport_netstage_kill ARGS kill SOURCES ${NDIR}/transport_netstage.c)
foreach(t transport_net_staged_data_n2 transport_net_staged_data_n4 transport_net_staged_kill
          transport_data_net_staged_n2 transport_semaphore_net_staged transport_flush_net_staged
          transport_peerdeath_net_staged proxy_cpu_net_staged transport_hostio_net_staged
          transport_netstage_bounds transport_netstage_kill)
  net_test(${t} ${NET_STAGED})
endforeach()
net_test(coll_net_staged_hosts4 ${NET_STAGED} "MSCCLPP_ALGO_CPU_SCRATCH=8192")
