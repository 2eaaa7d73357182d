# The hierarchical CPU algorithms (src/algo/cpu/hier.h) on stand-in hosts: coll_check -M gives
# rank r the MSCCLPP_HOSTID of host MAP[r] (no namespaces, no root), so ranks of one stand-in host
# share memory and the others connect over tcp. Every element checked (coll_check), every
# datatype and operator, in and out of place, counts that divide by no world size; a small scratch
# makes 999 elements loop through the pipeline. Each test a few seconds under ASan.
set(_coll_hier_dir ${CMAKE_CURRENT_LIST_DIR})
set(_hier_forced "MSCCLPP_ALGO=cpu_allreduce_hier,cpu_allgather_hier,cpu_reducescatter_hier,cpu_broadcast_hier,cpu_alltoall_hier")
set(_hier_colls allreduce,allgather,reducescatter,broadcast,alltoall)
# coll_hier_test(NAME NRANKS MAP ENV ARGS...)
function(coll_hier_test name nranks map env)
  mpp_mp_test(coll_check NRANKS ${nranks} TESTNAME ${name} ARGS -M ${map} ${ARGN} SOURCES ${_coll_hier_dir}/coll_check.c)
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "MSCCLPP_ALGO_CPU_SCRATCH=4096;${env}")
endfunction()

# Forced: 2 hosts x 2 ranks; uneven 3 + 1; 2 + 3 with interleaved ranks (host 0 = ranks 0 and 3);
# 3 hosts of 1, 2 and 3 ranks; one rank, and one host (no cross-host step: they must still be right).
coll_hier_test(coll_hier_2x2 4 0,0,1,1 ${_hier_forced} -c ${_hier_colls} -n 1,7,999)
coll_hier_test(coll_hier_3p1 4 0,0,0,1 ${_hier_forced} -c ${_hier_colls} -n 1,7,999)
coll_hier_test(coll_hier_2p3 5 0,1,1,0,1 ${_hier_forced} -c ${_hier_colls} -n 13,999)
coll_hier_test(coll_hier_1p2p3 6 2,1,2,0,1,2 ${_hier_forced} -c ${_hier_colls} -d int8,half,float,bfloat16,f8e5m2
               -o sum,avg,premulsum,max -n 1,13,999)
coll_hier_test(coll_hier_n1 1 0 ${_hier_forced} -c ${_hier_colls} -d int8,float,bfloat16 -o sum,avg,premulsum -n 1,999)
coll_hier_test(coll_hier_onehost 3 0,0,0 ${_hier_forced} -c ${_hier_colls} -d int32,half,double -o sum,avg,premulsum,prod -n 1,7,999)
# Alltoall with 64-byte chunks on hosts of 9 + 1 ranks: a bundle needs 9 elements per step, so
# int8 and half run cpu_alltoall_hier in steps of 7 and 3 elements and uint64 (72 bytes) falls back
# to cpu_alltoall_direct on every rank; both exact.
coll_hier_test(coll_hier_a2a_tiny 10 0,0,0,0,1,0,0,0,0,0 "${_hier_forced};MSCCLPP_ALGO_CPU_SCRATCH=64" -c alltoall
               -d int8,half,uint64 -n 1,13,100)
# The table: the hierarchical algorithms across stand-in hosts (uneven too), the flat ones on one
# host (-S checks what the selection picks before the collectives run through it).
coll_hier_test(coll_hier_table_3p1 4 0,0,0,1 "" -S hier -c ${_hier_colls} -d float,int64 -o sum,avg -n 5,20000)
# A rank dying inside the hierarchical allreduce (2 stand-in hosts of 2): every survivor names it.
mpp_mp_test(coll_deadrank NRANKS 4 TESTNAME coll_deadrank_hier_2x2 SOURCES ${_coll_hier_dir}/coll_deadrank.c)
set_tests_properties(coll_deadrank_hier_2x2 PROPERTIES ENVIRONMENT "COLL_DEADRANK_HOSTS=2")
coll_hier_test(coll_hier_table_onehost 4 0,0,0,0 "" -S flat -c ${_hier_colls} -d float -o sum -n 5)
# Chunks of 256 KiB and more cross tcp straight from their source (algo/cpu/xfer.c), smaller ones
# through the staging slot: 512 KiB slots (4 ranks, 4 MiB scratch), counts that end in a short
# chunk, both kinds in one call, the table's choices and forced hier.
coll_hier_test(coll_hier_bigchunk_2x2 4 0,0,1,1 "MSCCLPP_ALGO_CPU_SCRATCH=4194304" -c ${_hier_colls} -d float,int8
               -o sum,max -n 300001)
coll_hier_test(coll_hier_bigchunk_forced_2x1 2 0,1 "${_hier_forced};MSCCLPP_ALGO_CPU_SCRATCH=4194304" -c ${_hier_colls}
               -d bfloat16 -o sum -n 700001)
