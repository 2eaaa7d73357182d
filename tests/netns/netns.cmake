# Hosts made of network namespaces (label mp): netns_hosts.sh makes HOSTS namespaces linked by veths
# to a bridge and runs one mscclpp-run per host (--nnodes); it skips (77) where namespaces cannot
# be made (not root, no `ip`). Each test well under 15 s; ctest's TIMEOUT is above the harness's
# own limit (NETNS_LIMIT_S, 40 s) so that its cleanup always runs.
set(_netns_dir ${CMAKE_CURRENT_LIST_DIR})
mpp_test_target(netns_rank ${_netns_dir}/netns_rank.c)
mpp_test_target(coll_check ${_netns_dir}/../mp/coll_check.c)
mpp_test_target(coll_p2p ${_netns_dir}/../mp/coll_p2p.c)

# netns_test(NAME HOSTS RANKS_PER_HOST [INJECT --kill=R|--cut=H] PROGRAM ARGS...)
function(netns_test name hosts rph)
  cmake_parse_arguments(T "" "INJECT" "" ${ARGN})
  add_test(NAME ${name} COMMAND ${_netns_dir}/netns_hosts.sh ${hosts} ${rph} $<TARGET_FILE:mscclpp-run> ${T_INJECT}
                                -- ${T_UNPARSED_ARGUMENTS})
  set_tests_properties(${name} PROPERTIES LABELS mp TIMEOUT 60 SKIP_RETURN_CODE 77)
endfunction()

# Host identity: ranks of a namespace are one host (shm, local rank/size), of two are two (tcp);
# also when every rank sets one MSCCLPP_HOSTID (the namespace stays part of the identity).
netns_test(netns_probe_2x2 2 2 $<TARGET_FILE:netns_rank> probe 2)
netns_test(netns_probe_4x2 4 2 $<TARGET_FILE:netns_rank> probe 2)
netns_test(netns_probe_samehostid_2x2 2 2 $<TARGET_FILE:netns_rank> probe 2)
set_tests_properties(netns_probe_samehostid_2x2 PROPERTIES ENVIRONMENT "MSCCLPP_HOSTID=one-machine")
# MSCCLPP_HOSTID alone (no namespaces, no root): 2 stand-in hosts of 2 ranks.
mpp_mp_test(netns_rank NRANKS 4 TESTNAME netns_hostid_n4 ARGS hostid 2 SOURCES ${_netns_dir}/netns_rank.c)

# Every collective across hosts over tcp (shm inside a host), checked element by element.
netns_test(netns_coll_2x2 2 2 $<TARGET_FILE:coll_check> -d int32,float,bfloat16 -o sum,premulsum,max -n 1,1000)
netns_test(netns_coll_4x1 4 1 $<TARGET_FILE:coll_check> -d int8,double,half -o sum,min -n 7,999)
netns_test(netns_coll_4x2 4 2 $<TARGET_FILE:coll_check> -d float -o sum -n 13)
# Send/recv in groups in every order between every pair, across hosts and inside them.
netns_test(netns_p2p_2x2 2 2 $<TARGET_FILE:coll_p2p> 2)
set_tests_properties(netns_coll_2x2 netns_coll_4x1 netns_coll_4x2 netns_p2p_2x2 PROPERTIES ENVIRONMENT
                     "MSCCLPP_ALGO_CPU_SCRATCH=4096")

# A peer killed, or its host's link cut: every survivor fails within 2 s naming it. A cut link is
# silence, seen by the bootstrap's stall check: 1 s here (default 2 s) leaves 1 s of slack.
netns_test(netns_kill_4x1 4 1 INJECT --kill=2 $<TARGET_FILE:netns_rank> fail 2)
netns_test(netns_cut_4x1 4 1 INJECT --cut=2 $<TARGET_FILE:netns_rank> fail 2)
set_tests_properties(netns_cut_4x1 PROPERTIES ENVIRONMENT "MSCCLPP_BOOTSTRAP_STALL_MS=1000")

# The same across hosts over the libfabric net transport (MSCCLPP_NET_TRANSPORT=on: Auto picks net
# between hosts); registered only where the library was built with libfabric.
if(MSCCLPP_HAVE_LIBFABRIC)
  netns_test(netns_coll_net_2x2 2 2 $<TARGET_FILE:coll_check> -d int32,float -o sum,max -n 1,1000)
  netns_test(netns_kill_net_4x1 4 1 INJECT --kill=2 $<TARGET_FILE:netns_rank> fail 2)
  netns_test(netns_cut_net_4x1 4 1 INJECT --cut=2 $<TARGET_FILE:netns_rank> fail 2)
  set_tests_properties(netns_coll_net_2x2 PROPERTIES ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on;MSCCLPP_ALGO_CPU_SCRATCH=4096")
  set_tests_properties(netns_kill_net_4x1 PROPERTIES ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on")
  set_tests_properties(netns_cut_net_4x1 PROPERTIES ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on;MSCCLPP_BOOTSTRAP_STALL_MS=1000")
  # Every collective again with the net transport's staged path forced (MSCCLPP_NET_STAGE_HOST=1:
  # every write between hosts crosses the staging rings, as GPU memory does without FI_HMEM), and a
  # killed host with it.
  netns_test(netns_coll_net_staged_2x2 2 2 $<TARGET_FILE:coll_check> -d int32,float -o sum,max -n 1,1000)
  netns_test(netns_kill_net_staged_4x1 4 1 INJECT --kill=2 $<TARGET_FILE:netns_rank> fail 2)
  set_tests_properties(netns_coll_net_staged_2x2 PROPERTIES ENVIRONMENT
                       "MSCCLPP_NET_TRANSPORT=on;MSCCLPP_NET_STAGE_HOST=1;MSCCLPP_ALGO_CPU_SCRATCH=4096")
  set_tests_properties(netns_kill_net_staged_4x1 PROPERTIES ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on;MSCCLPP_NET_STAGE_HOST=1")
endif()

# Port channels (the proxy's puts, signals and flushes, every byte checked) and plans of the corpus
# (a pipelined ring over memory channels; the DSL's LL allreduce whose packets cross port channels)
# between namespace hosts, over tcp and over net.
set(_netns_plans ${CMAKE_CURRENT_BINARY_DIR}/plans)
netns_test(netns_proxy_tcp_2x1 2 1 $<TARGET_FILE:proxy_cpu> tcp 20)
netns_test(netns_plan_2x2 2 2 $<TARGET_FILE:mscclpp-plan> run ${_netns_plans}/allreduce_ring_pipeline_n4.json
           ${_netns_plans}/dsl_allreduce_port_ppkt_n4.json -n 4 --cpu --size 4096,1000,200000 --iters 2)
set_tests_properties(netns_plan_2x2 PROPERTIES FIXTURES_REQUIRED plan_corpus
                     ENVIRONMENT "MSCCLPP_EXEC_TIMEOUT_MS=30000;MSCCLPP_LOG_LEVEL=error")
if(MSCCLPP_HAVE_LIBFABRIC)
  netns_test(netns_proxy_net_2x1 2 1 $<TARGET_FILE:proxy_cpu> net 20)
  netns_test(netns_plan_net_2x2 2 2 $<TARGET_FILE:mscclpp-plan> run ${_netns_plans}/allreduce_ring_pipeline_n4.json
             ${_netns_plans}/dsl_allreduce_port_ppkt_n4.json -n 4 --cpu --size 4096,1000,200000 --iters 2)
  set_tests_properties(netns_proxy_net_2x1 PROPERTIES ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on")
  set_tests_properties(netns_plan_net_2x2 PROPERTIES FIXTURES_REQUIRED plan_corpus
                       ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on;MSCCLPP_EXEC_TIMEOUT_MS=30000;MSCCLPP_LOG_LEVEL=error")
endif()
