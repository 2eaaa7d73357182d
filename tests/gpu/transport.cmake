# GPU tests of registered memory and the P2P transport (exit 77 without 2 GPUs).
set(GDIR ${CMAKE_CURRENT_LIST_DIR})
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_legacy_conn ARGS legacy conn SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_vmm_conn ARGS vmm conn SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_legacy_peerptr ARGS legacy peerptr SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_vmm_peerptr ARGS vmm peerptr SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_legacy_tcp ARGS legacy tcp SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 4 TESTNAME transport_gpu_legacy_conn_n4 ARGS legacy conn SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 4 TESTNAME transport_gpu_vmm_conn_n4 ARGS vmm conn SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 8 TESTNAME transport_gpu_legacy_conn_n8 ARGS legacy conn SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 8 TESTNAME transport_gpu_vmm_conn_n8 ARGS vmm conn SOURCES ${GDIR}/transport_gpu.c)
# GPU ranks of different stand-in hosts (MSCCLPP_HOSTID per rank, set by the test) over the net
# transport (libfabric): GPU memory staged through pinned host rings (tcp grants no FI_HMEM;
# MSCCLPP_NET_GPU_MEM=staged forces it anyway), and directly under FI_HMEM through the shm provider
# where it grants it (skips with a line saying so where it does not).
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_legacy_net ARGS legacy net SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_vmm_net_staged ARGS vmm net SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 4 TESTNAME transport_gpu_vmm_net_n4 ARGS vmm net SOURCES ${GDIR}/transport_gpu.c)
mpp_gpu_test(transport_gpu NRANKS 2 TESTNAME transport_gpu_vmm_net_hmem ARGS vmm net SOURCES ${GDIR}/transport_gpu.c)
set_tests_properties(transport_gpu_legacy_net transport_gpu_vmm_net_n4 PROPERTIES ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on")
set_tests_properties(transport_gpu_vmm_net_staged PROPERTIES ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on;MSCCLPP_NET_GPU_MEM=staged")
set_tests_properties(transport_gpu_vmm_net_hmem PROPERTIES ENVIRONMENT
                     "MSCCLPP_NET_TRANSPORT=on;MSCCLPP_NET_GPU_MEM=hmem;MSCCLPP_NET_PROVIDER=shm")
