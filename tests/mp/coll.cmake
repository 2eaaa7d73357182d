# Multi-process tests of the collectives on CPU ranks (label mp). A small scratch
# (MSCCLPP_ALGO_CPU_SCRATCH) makes even small counts loop through the pipeline many times.
set(_coll_dir ${CMAKE_CURRENT_LIST_DIR})
function(coll_test name nranks scratch)
  mpp_mp_test(coll_check NRANKS ${nranks} TESTNAME ${name} ARGS ${ARGN} SOURCES ${_coll_dir}/coll_check.c)
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "MSCCLPP_ALGO_CPU_SCRATCH=${scratch}")
endfunction()

# The whole collective x datatype x operator matrix, in and out of place, on 1 to 8 ranks (2 ranks:
# a pair of "hosts" over tcp too). On 5 to 8 ranks the counts are odd and divide by no world size
# (13 and 999 elements are no multiple of 16 bytes for any datatype); 999 loops through the scratch.
coll_test(coll_matrix_n1 1 4096 -n 1,1000)
coll_test(coll_matrix_n2 2 4096 -n 0,1,7,129,1000)
coll_test(coll_matrix_n3 3 4096 -n 1,7,1000)
coll_test(coll_matrix_n4 4 8192 -n 1,5,1000)
foreach(n 5 6 7 8)
  coll_test(coll_matrix_n${n} ${n} 8192 -n 1,13,999)
endforeach()
coll_test(coll_matrix_tcp_n2 2 4096 -H 2 -n 1,333)
# Spot checks on other world sizes, a default-sized scratch (a message over 16 MiB) and tcp.
coll_test(coll_spot_n3 3 4096 -d int8,half,float,bfloat16,f8e5m2 -o sum,avg,premulsum,max -n 1,13,999)
coll_test(coll_spot_n5 5 8192 -d uint8,float,double,f8e4m3 -o sum,prod,min -n 1,3001)
coll_test(coll_spot_n8 8 16384 -d int32,half,double,f8e4m3 -o sum,avg,prod,min -n 2,777)
coll_test(coll_spot_tcp_n6 6 16384 -H 3 -d uint64,bfloat16 -o sum,max,premulsum -n 1,2049)
coll_test(coll_large_n2 2 16777216 -c allreduce,allgather,reducescatter -d float -o sum -n 4500000 -p out)
coll_test(coll_tcp_n4 4 8192 -H 2 -d int64,bfloat16,f8e5m2 -o sum,premulsum -n 1,1000)
coll_test(coll_tcp_n3 3 4096 -H 3 -c allreduce,broadcast,alltoall -d float -o sum -n 3,2000)
# The small-message allreduce forced for every size.
coll_test(coll_allpairs_n3 3 4096 -c allreduce -n 1,7,1000)
set_tests_properties(coll_allpairs_n3 PROPERTIES ENVIRONMENT
                     "MSCCLPP_ALGO_CPU_SCRATCH=4096;MSCCLPP_ALGO=cpu_allreduce_allpairs")
# The bandwidth allreduce forced for every size (the table picks all-pairs for small messages on 3+ ranks).
foreach(n 2 4)
  coll_test(coll_rsag_n${n} ${n} 4096 -c allreduce -n 1,7,1000)
  set_tests_properties(coll_rsag_n${n} PROPERTIES ENVIRONMENT
                       "MSCCLPP_ALGO_CPU_SCRATCH=4096;MSCCLPP_ALGO=cpu_allreduce_rsag")
endforeach()

# One rank with the algorithms forced: they run (instead of the one-rank copy) and must be right.
coll_test(coll_forced_n1 1 4096 -c allreduce,allgather,reducescatter -n 1,7,1000)
set_tests_properties(coll_forced_n1 PROPERTIES ENVIRONMENT
                     "MSCCLPP_ALGO_CPU_SCRATCH=4096;MSCCLPP_ALGO=cpu_allreduce_allpairs,cpu_allgather_direct,cpu_reducescatter_direct")

# Send/recv in groups in every order, ungrouped, nested, beside a collective; shm and tcp.
function(p2p_test name nranks)
  mpp_mp_test(coll_p2p NRANKS ${nranks} TESTNAME ${name} ARGS ${ARGN} SOURCES ${_coll_dir}/coll_p2p.c)
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "MSCCLPP_ALGO_CPU_SCRATCH=8192")
endfunction()
p2p_test(coll_p2p_n1 1 2)
p2p_test(coll_p2p_n2 2 3)
p2p_test(coll_p2p_n3 3 3)
p2p_test(coll_p2p_n5 5 2)
p2p_test(coll_p2p_tcp_n4 4 2 2)

# Errors: bad arguments, ranks that disagree, a dead peer, bad selection settings.
function(err_test name)
  mpp_mp_test(coll_errors NRANKS 2 TESTNAME ${name} ARGS ${ARGN} SOURCES ${_coll_dir}/coll_errors.c)
endfunction()
err_test(coll_errors_args args)
foreach(what count coll dtype op root)
  err_test(coll_errors_mismatch_${what} mismatch ${what})
endforeach()
err_test(coll_errors_peerdeath peerdeath)
err_test(coll_errors_windows windows)
err_test(coll_errors_scratch scratch)
err_test(coll_errors_badalgo badalgo)
set_tests_properties(coll_errors_badalgo PROPERTIES ENVIRONMENT "MSCCLPP_ALGO=cpu_allgather_direct,cpu_bogus")
err_test(coll_errors_badtable badtable)
set_tests_properties(coll_errors_badtable PROPERTIES ENVIRONMENT "MSCCLPP_ALGO_TABLE=/nonexistent/algo.tsv")

# mscclpp-perf end to end on CPU ranks: output format, checks, json, exit status.
mpp_test_target(coll_perf_smoke ${_coll_dir}/coll_perf_smoke.c)
add_test(NAME coll_perf_smoke COMMAND coll_perf_smoke $<TARGET_FILE:mscclpp-run> $<TARGET_FILE:mscclpp-perf>)
set_tests_properties(coll_perf_smoke PROPERTIES LABELS mp TIMEOUT 300)

# The main job's program (`make demo`) on 4 CPU ranks, small sizes: it checks every element.
add_test(NAME demo_collectives_n4 COMMAND mscclpp-run -n 4 $<TARGET_FILE:example_collectives_demo> 4096 65536)
set_tests_properties(demo_collectives_n4 PROPERTIES LABELS mp TIMEOUT 120)

# Issue 22 item 10: tcp mode (one "host" per rank), a rank dies: every survivor names it.
mpp_mp_test(coll_deadrank NRANKS 4 SOURCES ${_coll_dir}/coll_deadrank.c)
