# The communicator's lifetime across threads: mscclppCommAbort while another thread is blocked in a
# bootstrap wait or a CPU collective (label mp).
foreach(mode barrier allreduce)
  mpp_mp_test(comm_abort NRANKS 2 TESTNAME comm_abort_${mode}_n2 ARGS ${mode} SOURCES ${CMAKE_CURRENT_LIST_DIR}/comm_abort.c)
  set_tests_properties(comm_abort_${mode}_n2 PROPERTIES TIMEOUT 60)
endforeach()
