# The hierarchical CPU algorithms on hosts made of network namespaces (netns_test from netns.cmake,
# which CMake includes first: tests/CMakeLists.txt globs the lists in name order): forced with
# MSCCLPP_ALGO on 2x2 and 4x2 hosts, and picked by the table (coll_check -S hier) across hosts.
set(_hier_forced "MSCCLPP_ALGO=cpu_allreduce_hier,cpu_allgather_hier,cpu_reducescatter_hier,cpu_broadcast_hier,cpu_alltoall_hier")
netns_test(netns_coll_hier_2x2 2 2 $<TARGET_FILE:coll_check> -c allreduce,allgather,reducescatter,broadcast,alltoall -n 7,999)
netns_test(netns_coll_hier_4x2 4 2 $<TARGET_FILE:coll_check> -c allreduce,allgather,reducescatter,broadcast,alltoall
           -d int8,uint64,half,float,bfloat16,f8e4m3 -o sum,avg,premulsum,min -n 3,999)
netns_test(netns_coll_hier_table_2x2 2 2 $<TARGET_FILE:coll_check> -S hier -c allreduce,allgather,reducescatter,broadcast,alltoall
           -d float,int32 -o sum,prod -n 5,20000)
set_tests_properties(netns_coll_hier_2x2 netns_coll_hier_4x2 PROPERTIES ENVIRONMENT
                     "MSCCLPP_ALGO_CPU_SCRATCH=4096;${_hier_forced}")
set_tests_properties(netns_coll_hier_table_2x2 PROPERTIES ENVIRONMENT "MSCCLPP_ALGO_CPU_SCRATCH=4096")
