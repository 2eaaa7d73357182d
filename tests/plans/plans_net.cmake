# Plans on CPU ranks of two "hosts" with MSCCLPP_NET_TRANSPORT=on: the executor's connections to the
# other host's ranks go over the net transport (libfabric) instead of tcp (falls back to tcp, and
# still passes, where no libfabric provider works).
foreach(pname allreduce_ring_pipeline_n4 allreduce_max_port_n4 dsl_allreduce_port_ppkt_n4 allgather_get_n4)
  plan_test(plan_net_${pname} ${_plans_out}/${pname}.json -n 4 --size 4096,1000,200000 --hosts 2)
  set_tests_properties(plan_net_${pname} PROPERTIES
                       ENVIRONMENT "MSCCLPP_NET_TRANSPORT=on;MSCCLPP_EXEC_TIMEOUT_MS=60000;MSCCLPP_LOG_LEVEL=none")
endforeach()
# The same plans with the net transport's staged path forced (MSCCLPP_NET_STAGE_HOST=1): the
# executor's writes between hosts cross the staging rings (its reads stay direct).
foreach(pname allreduce_ring_pipeline_n4 dsl_allreduce_port_ppkt_n4)
  plan_test(plan_net_staged_${pname} ${_plans_out}/${pname}.json -n 4 --size 4096,1000,200000 --hosts 2)
  set_tests_properties(plan_net_staged_${pname} PROPERTIES ENVIRONMENT
                       "MSCCLPP_NET_TRANSPORT=on;MSCCLPP_NET_STAGE_HOST=1;MSCCLPP_EXEC_TIMEOUT_MS=60000;MSCCLPP_LOG_LEVEL=none")
endforeach()
