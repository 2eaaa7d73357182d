# The GPU plan executor (label gpu; 77 = skipped without enough GPUs): every plan of the corpus
# (tests/plans, generated into the build tree by plans.cmake's fixture) for N ranks, at its sizes,
# every reduce_op x datatype for reductions, LL8 packets for LL plans, back-to-back calls and CUDA
# graph replays, then the MSCCL XML samples for N ranks; results checked exactly. One test per
# rank count of the corpus (2, 3, 4, 8); each skips when the machine has fewer GPUs.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(_exec_corpus ${CMAKE_CURRENT_BINARY_DIR}/plans/good.tsv)
  set(_exec_xml ring_allreduce ring_allreduce_ll allpairs_allreduce_ll ring_allgather ring_allreduce_n2
      allpairs_allreduce_cpy_re allpairs_allreduce_cpy_re_ll ring_allgather_cpy)
  list(TRANSFORM _exec_xml PREPEND ${PROJECT_SOURCE_DIR}/tests/xml/)
  list(TRANSFORM _exec_xml APPEND .xml)
  foreach(n 2 3 4 8)
    mpp_gpu_test(exec_gpu NRANKS ${n} TESTNAME exec_gpu_n${n} ARGS ${_exec_corpus} ${_exec_xml}
                 SOURCES ${CMAKE_CURRENT_LIST_DIR}/exec_gpu.c)
    set_tests_properties(exec_gpu_n${n} PROPERTIES TIMEOUT 900 FIXTURES_REQUIRED plan_corpus
                         ENVIRONMENT "MSCCLPP_DEVICE_WAIT_TIMEOUT=20000;MSCCLPP_LOG_LEVEL=warn")
  endforeach()
endif()

# Plans on GPU ranks of two stand-in hosts (mscclpp-plan --hosts 2: MSCCLPP_HOSTID for ranks 0-1 and
# 2-3, as a two-node plan lays out its gpus): each half reaches the other through port channels over
# tcp (the _net variants: libfabric's net transport), results checked exactly, LL plans with their
# ppkt over port channels as proxy puts. A plan with a memory channel across the hosts is refused
# on every rank, naming the channel, before anything is set up. (The reference DSL's own two-node
# plans: scripts/ref-plans.py --plans DIR --gpu, not in the tree.)
set(_xh_plans allreduce_max_port_n4 dsl_allreduce_port_ppkt_n4)
foreach(pname ${_xh_plans})
  foreach(tr tcp net)
    add_test(NAME exec_gpu_xh_${tr}_${pname} COMMAND mscclpp-plan run ${CMAKE_CURRENT_BINARY_DIR}/plans/${pname}.json
             -n 4 --gpu --hosts 2 --size 4096,1000,200000 --iters 2)
    set(_env "MSCCLPP_DEVICE_WAIT_TIMEOUT=20000;MSCCLPP_LOG_LEVEL=warn")
    if(tr STREQUAL "net")
      set(_env "${_env};MSCCLPP_NET_TRANSPORT=on")
    endif()
    set_tests_properties(exec_gpu_xh_${tr}_${pname} PROPERTIES LABELS gpu TIMEOUT 120 FIXTURES_REQUIRED plan_corpus
                         ENVIRONMENT "${_env}" SKIP_REGULAR_EXPRESSION "--gpu: no usable GPU|--gpu: this build has no CUDA")
  endforeach()
endforeach()
add_test(NAME exec_gpu_xh_refused COMMAND mscclpp-plan run ${CMAKE_CURRENT_BINARY_DIR}/plans/allreduce_allpairs_memory_n4.json
         -n 4 --gpu --hosts 2 --size 4096 --iters 1)
set_tests_properties(exec_gpu_xh_refused PROPERTIES LABELS gpu TIMEOUT 60 FIXTURES_REQUIRED plan_corpus
                     PASS_REGULAR_EXPRESSION "memory channel to gpu [23], which is on another host"
                     SKIP_REGULAR_EXPRESSION "--gpu: no usable GPU|--gpu: this build has no CUDA")
