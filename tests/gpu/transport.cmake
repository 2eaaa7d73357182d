# GPU tests of registered memory and the P2P transport (exit 77 without 2 GPUs).
set(GDIR ${CMAKE_CURRENT_LIST_DIR})
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_legacy_conn ARGS legacy conn SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_vmm_conn ARGS vmm conn SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_legacy_peerptr ARGS legacy peerptr SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_vmm_peerptr ARGS vmm peerptr SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_legacy_tcp ARGS legacy tcp SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 4 TESTNAME transport_gpu_legacy_conn_n4 ARGS legacy conn SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 4 TESTNAME transport_gpu_vmm_conn_n4 ARGS vmm conn SOURCES ${GDIR}/transport_gpu.c)
