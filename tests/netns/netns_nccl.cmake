# The NCCL library across hosts made of network namespaces (label mp): an NCCL program, unchanged
# (tests/nccl/nccl_hosts.c: a client of nccl.h linked to libnccl.so.2, its ncclUniqueId passed in a
# file), on CPU ranks under netns_nccl.sh, which runs netns_hosts.sh (netns.cmake) and checks the
# library's log: HOSTS hosts seen, and with --hier every allreduce, allgather, reducescatter and
# broadcast through its cpu_*_hier algorithm. Skips (77) where namespaces cannot be made.
nccl_test_target(nccl_hosts ${PROJECT_SOURCE_DIR}/tests/nccl/nccl_hosts.c)

# netns_nccl_test(NAME HOSTS RANKS_PER_HOST [OPTIONS of netns_nccl.sh...] -- ARGS of nccl_hosts...)
function(netns_nccl_test name hosts rph)
  add_test(NAME ${name} COMMAND ${CMAKE_CURRENT_LIST_DIR}/netns_nccl.sh ${hosts} ${rph} $<TARGET_FILE:mscclpp-run>
                                ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS mp TIMEOUT 60 SKIP_RETURN_CODE 77 ENVIRONMENT
                       "MSCCLPP_RANK_KIND=cpu;MSCCLPP_ALGO_CPU_SCRATCH=4096")
endfunction()

# Every NCCL collective, send/recv between every pair and groups, results exact, on 2x2 and 4x1.
netns_nccl_test(netns_nccl_2x2 2 2 --hier --across=tcp -- $<TARGET_FILE:nccl_hosts> all)
netns_nccl_test(netns_nccl_4x1 4 1 --hier --across=tcp -- $<TARGET_FILE:nccl_hosts> all)
# A rank killed: every survivor's NCCL call fails within 2 s naming it (on its host and across).
netns_nccl_test(netns_nccl_kill_2x2 2 2 --kill=3 -- $<TARGET_FILE:nccl_hosts> fail 3)
# The same over the libfabric net transport between hosts.
if(MSCCLPP_HAVE_LIBFABRIC)
  netns_nccl_test(netns_nccl_net_2x2 2 2 --hier --across=net -- $<TARGET_FILE:nccl_hosts> all)
  netns_nccl_test(netns_nccl_kill_net_4x1 4 1 --kill=2 -- $<TARGET_FILE:nccl_hosts> fail 2)
  set_tests_properties(netns_nccl_net_2x2 netns_nccl_kill_net_4x1 PROPERTIES ENVIRONMENT
                       "MSCCLPP_RANK_KIND=cpu;MSCCLPP_ALGO_CPU_SCRATCH=4096;MSCCLPP_NET_TRANSPORT=on")
endif()
