# The plan-conformance corpus (tests/plans/gen_plans.py writes it; docs/plans.md). The generator
# runs at configure time to learn the plans and again as the first test (fixture plans_gen), so
# the corpus that runs is always the generator's current output. Every good plan runs on CPU ranks
# through `mscclpp-plan run` (inputs filled, results checked against the collective) at several
# sizes, odd ones included; every bad plan must be rejected naming its field (check_bad.py).
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "python3 not found: plan corpus tests skipped")
  return()
endif()
set(_plans_src ${CMAKE_CURRENT_LIST_DIR})
set(_plans_out ${CMAKE_CURRENT_BINARY_DIR}/plans)
execute_process(COMMAND ${Python3_EXECUTABLE} ${_plans_src}/gen_plans.py ${_plans_out} RESULT_VARIABLE _gen_rc)
if(NOT _gen_rc EQUAL 0)
  message(FATAL_ERROR "tests/plans/gen_plans.py failed (${_gen_rc})")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_plans_src}/gen_plans.py)

# Every plan op has its case in both interpreters' dispatch switches, and none has a default
# (check_dispatch.py; gcc's -Wswitch-enum covers the host switches, this also the device ones).
add_test(NAME plan_dispatch COMMAND ${Python3_EXECUTABLE} ${_plans_src}/check_dispatch.py ${PROJECT_SOURCE_DIR}/src)
add_test(NAME plan_dispatch_selftest COMMAND ${Python3_EXECUTABLE} ${_plans_src}/check_dispatch.py --self-test)
set_tests_properties(plan_dispatch plan_dispatch_selftest PROPERTIES LABELS unit TIMEOUT 60)

add_test(NAME plans_gen COMMAND ${Python3_EXECUTABLE} ${_plans_src}/gen_plans.py ${_plans_out})
set_tests_properties(plans_gen PROPERTIES LABELS unit FIXTURES_SETUP plan_corpus)

# The GPU executor's op tables and the kernel's size rules against the host's, over the corpus
# (no GPU needed: tests/unit/exec_table.c).
mpp_test_target(exec_table ${PROJECT_SOURCE_DIR}/tests/unit/exec_table.c)
add_test(NAME exec_table COMMAND exec_table ${_plans_out}/good.tsv)
set_tests_properties(exec_table PROPERTIES LABELS unit TIMEOUT 120 FIXTURES_REQUIRED plan_corpus)

function(plan_test name)
  add_test(NAME ${name} COMMAND mscclpp-plan run ${ARGN} --cpu --iters 2)
  set_tests_properties(${name} PROPERTIES LABELS mp TIMEOUT 300 FIXTURES_REQUIRED plan_corpus
                       ENVIRONMENT "MSCCLPP_EXEC_TIMEOUT_MS=60000;MSCCLPP_LOG_LEVEL=none")
endfunction()

file(STRINGS ${_plans_out}/good.tsv _good)
foreach(line ${_good})
  string(REPLACE "\t" ";" f "${line}")
  list(GET f 0 path)
  list(GET f 1 nranks)
  list(GET f 2 sizes)
  get_filename_component(pname ${path} NAME_WE)
  plan_test(plan_${pname} ${path} -n ${nranks} --size ${sizes})
  # The same plan with the ranks on two "hosts": peers of the other host over tcp.
  plan_test(plan_tcp_${pname} ${path} -n ${nranks} --size ${sizes} --hosts 2)
endforeach()
# Three hosts: ranks of one host mapped, of the two others over tcp, in one call.
foreach(pname allreduce_allpairs_ll_n8 allreduce_ring_pipeline_n4 allreduce_switch_glres_n4 allgather_get_n4
        allgather_barrier_sem_tbg_n4 allreduce_max_port_n4)
  string(REGEX REPLACE ".*_n([0-9]+)$" "\\1" n ${pname})
  plan_test(plan_tcp3_${pname} ${_plans_out}/${pname}.json -n ${n} --size 4096,1000,200000 --hosts 3)
endforeach()
# Other datatypes (reductions in every accumulator family) and reduce_op max.
plan_test(plan_dtype_bf16 ${_plans_out}/allreduce_allpairs_memory_n4.json -n 4 --size 4096,1000 --dtype bfloat16)
plan_test(plan_dtype_int8 ${_plans_out}/allreduce_ring_pipeline_n4.json -n 4 --size 4096,1001 --dtype int8)
plan_test(plan_dtype_double ${_plans_out}/allreduce_allpairs_ll_n4.json -n 4 --size 4096,1000 --dtype double)
plan_test(plan_dtype_half_max ${_plans_out}/allreduce_max_port_n4.json -n 4 --size 4096,1000 --dtype half)
plan_test(plan_dtype_u64_rs ${_plans_out}/reducescatter_n4.json -n 4 --size 4096,1000 --dtype uint64)
# Every reduce_op on every datatype: per op, the generator's variants of one plan per reduction path
# of the executor (data, packets, switch) with every reduce op naming that op (redop.tsv: op, ranks,
# sizes, plan files), each run with --dtype all and checked against that op.
file(STRINGS ${_plans_out}/redop.tsv _redop)
foreach(line ${_redop})
  string(REPLACE "\t" ";" f "${line}")
  list(GET f 0 op)
  list(GET f 1 nranks)
  list(GET f 2 sizes)
  list(GET f 3 files)
  string(REPLACE "," ";" files "${files}")
  plan_test(plan_redop_${op} ${files} -n ${nranks} --size ${sizes} --dtype all)
endforeach()

add_test(NAME plans_bad COMMAND ${Python3_EXECUTABLE} ${_plans_src}/check_bad.py $<TARGET_FILE:mscclpp-plan>
         ${_plans_out}/bad/expect.tsv)
set_tests_properties(plans_bad PROPERTIES LABELS unit TIMEOUT 120 FIXTURES_REQUIRED plan_corpus)

# The order check (mscclpp-plan validate --strict): findings on plans with known hazards, none on
# plans that keep back-to-back calls apart, the whole corpus among them.
add_test(NAME plans_order COMMAND ${Python3_EXECUTABLE} ${_plans_src}/check_order.py $<TARGET_FILE:mscclpp-plan>
         ${_plans_out}/order ${_plans_out})
set_tests_properties(plans_order PROPERTIES LABELS unit TIMEOUT 120 FIXTURES_REQUIRED plan_corpus)

mpp_unit_test(plan_api ${_plans_src}/plan_api.c)
# Loading limits: huge plans and XML refused early with bounded time and peak RSS (plan_limits.c).
mpp_unit_test(plan_limits ${_plans_src}/plan_limits.c)
# Several plans in turn on one communicator (cached per-plan state, scratch regrowth, flags).
plan_test(plan_multi ${_plans_out}/allreduce_allpairs_ll_n4.json ${_plans_out}/allgather_inplace_memory_n4.json
          ${_plans_out}/reducescatter_n4.json ${_plans_out}/allreduce_ring_pipeline_n4.json
          ${_plans_out}/allgather_switch_ll_n4.json -n 4 --size 1000,4096,200000)
plan_test(plan_multi_tcp ${_plans_out}/allreduce_allpairs_ll_n4.json ${_plans_out}/allgather_inplace_memory_n4.json
          ${_plans_out}/reducescatter_n4.json ${_plans_out}/allreduce_ring_pipeline_n4.json
          ${_plans_out}/allgather_switch_ll_n4.json -n 4 --size 1000,4096,3000000 --hosts 2)
# A plan that deadlocks: loading refuses it (the order check proves a cycle of waits), so it runs
# with the check off to show that every wait is still bounded and the error names rank, block, op
# and peer (the exit status is not checked, the message is: whichever rank's bound ends first; the
# other may then see that rank exit instead).
add_test(NAME plan_deadlock_bounded COMMAND mscclpp-plan run ${_plans_out}/deadlock_n2.json.hang -n 2 --cpu --iters 1)
set_tests_properties(plan_deadlock_bounded PROPERTIES LABELS mp TIMEOUT 60 FIXTURES_REQUIRED plan_corpus
  ENVIRONMENT "MSCCLPP_EXEC_TIMEOUT_MS=300;MSCCLPP_LOG_LEVEL=none;MSCCLPP_PLAN_ORDER_CHECK=off"
  PASS_REGULAR_EXPRESSION "rank [01] block 0 op 0 \\(wait\\): waited 300 ms for a signal on a memory channel from rank [01]")
# The same over tcp: the bound holds and names the peer, on another host (whichever rank's bound
# ends first; the other then reports that its peer is gone).
add_test(NAME plan_deadlock_bounded_tcp COMMAND mscclpp-plan run ${_plans_out}/deadlock_n2.json.hang -n 2 --cpu --iters 1
         --hosts 2)
set_tests_properties(plan_deadlock_bounded_tcp PROPERTIES LABELS mp TIMEOUT 60 FIXTURES_REQUIRED plan_corpus
  ENVIRONMENT "MSCCLPP_EXEC_TIMEOUT_MS=300;MSCCLPP_LOG_LEVEL=none;MSCCLPP_PLAN_ORDER_CHECK=off"
  PASS_REGULAR_EXPRESSION "rank [01] block 0 op 0 \\(wait\\): waited 300 ms for a signal on a memory channel from rank [01]")
# A rank dies between two calls: every survivor's next call fails naming it, within seconds (not
# at the 60 s wait bound the test sets).
mpp_mp_test(plan_peerdeath NRANKS 4 ARGS ${_plans_out}/allreduce_allpairs_memory_n4.json
            SOURCES ${PROJECT_SOURCE_DIR}/tests/mp/plan_peerdeath.c)
set_tests_properties(plan_peerdeath_n4 PROPERTIES FIXTURES_REQUIRED plan_corpus TIMEOUT 120
                     ENVIRONMENT "MSCCLPP_EXEC_TIMEOUT_MS=60000")
# draw: the per-step listing with its from/to matrix, and the dot graph.
add_test(NAME plan_draw COMMAND mscclpp-plan draw ${_plans_out}/allreduce_allpairs_memory_n4.json)
set_tests_properties(plan_draw PROPERTIES LABELS unit FIXTURES_REQUIRED plan_corpus
                     PASS_REGULAR_EXPRESSION "r0/tb0  put r0.i\\[1:2\\] -> r1.s\\[0:1\\] @mem:1.*from.to")
add_test(NAME plan_draw_dot COMMAND mscclpp-plan draw ${_plans_out}/sendrecv_n2.json --dot)
set_tests_properties(plan_draw_dot PROPERTIES LABELS unit FIXTURES_REQUIRED plan_corpus
                     PASS_REGULAR_EXPRESSION "digraph.*r0 -> r1 \\[label=\"tb0#2 pws o\\[0\\]\"\\]")
