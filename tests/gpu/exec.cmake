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
