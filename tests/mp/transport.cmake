# Multi-process tests of registered memory, connections and host semaphores (CPU ranks).
set(TDIR ${CMAKE_CURRENT_LIST_DIR})
mpp_mp_test(transport_data NRANKS 2 TESTNAME transport_data_shm_n2 ARGS shm memfd 40 SOURCES ${TDIR}/transport_data.c)
mpp_mp_test(transport_data NRANKS 4 TESTNAME transport_data_shm_n4 ARGS shm memfd 10 SOURCES ${TDIR}/transport_data.c)
mpp_mp_test(transport_data NRANKS 2 TESTNAME transport_data_tcp_n2 ARGS tcp malloc 40 SOURCES ${TDIR}/transport_data.c)
mpp_mp_test(transport_data NRANKS 3 TESTNAME transport_data_tcp_n3 ARGS tcp memfd 10 SOURCES ${TDIR}/transport_data.c)
mpp_mp_test(transport_data NRANKS 8 TESTNAME transport_data_auto_n8 ARGS auto memfd 3 SOURCES ${TDIR}/transport_data.c)
mpp_mp_test(transport_data NRANKS 4 TESTNAME transport_data_mixed_n4 ARGS auto memfd 6 2 SOURCES ${TDIR}/transport_data.c)
mpp_mp_test(transport_ring NRANKS 2 TESTNAME transport_ring_shm_n2 ARGS shm 30 SOURCES ${TDIR}/transport_ring.c)
mpp_mp_test(transport_ring NRANKS 5 TESTNAME transport_ring_shm_n5 ARGS shm 20 SOURCES ${TDIR}/transport_ring.c)
mpp_mp_test(transport_ring NRANKS 3 TESTNAME transport_ring_tcp_n3 ARGS tcp 20 SOURCES ${TDIR}/transport_ring.c)
mpp_mp_test(transport_ring NRANKS 8 TESTNAME transport_ring_auto_n8 ARGS auto 10 SOURCES ${TDIR}/transport_ring.c)
mpp_mp_test(transport_semaphore NRANKS 2 TESTNAME transport_semaphore_shm ARGS shm SOURCES ${TDIR}/transport_semaphore.c)
mpp_mp_test(transport_semaphore NRANKS 2 TESTNAME transport_semaphore_tcp ARGS tcp SOURCES ${TDIR}/transport_semaphore.c)
mpp_mp_test(transport_flush NRANKS 2 TESTNAME transport_flush_shm ARGS shm SOURCES ${TDIR}/transport_flush.c)
mpp_mp_test(transport_flush NRANKS 2 TESTNAME transport_flush_tcp ARGS tcp SOURCES ${TDIR}/transport_flush.c)
mpp_mp_test(transport_peerdeath NRANKS 2 TESTNAME transport_peerdeath_tcp ARGS tcp SOURCES ${TDIR}/transport_peerdeath.c)
mpp_mp_test(transport_peerdeath NRANKS 2 TESTNAME transport_peerdeath_shm ARGS shm SOURCES ${TDIR}/transport_peerdeath.c)
mpp_mp_test(transport_errors NRANKS 2 SOURCES ${TDIR}/transport_errors.c)
# The internal host-memory reads and writes of tcp connections (the CPU executor across hosts).
mpp_mp_test(transport_hostio NRANKS 2 TESTNAME transport_hostio_tcp SOURCES ${TDIR}/transport_hostio.c)

# Issue 22 item 7: liveness of a peer in another PID namespace (rank 1 re-executes itself under
# unshare; skipped where unprivileged namespaces are not allowed).
mpp_mp_test(transport_pidns NRANKS 2 SOURCES ${TDIR}/transport_pidns.c)

# Issue 22: a local stranger at a tcp connection's listener during setup (garbage, then a
# well-formed hello with a forged proof) is refused; the real connection completes in time.
mpp_mp_test(transport_stranger NRANKS 2 TESTNAME transport_stranger SOURCES ${TDIR}/transport_stranger.c)
set_tests_properties(transport_stranger PROPERTIES TIMEOUT 60)
