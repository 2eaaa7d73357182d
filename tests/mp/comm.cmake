# The communicator's lifetime across threads: mscclppCommAbort while another thread is blocked in a
# bootstrap wait or a CPU collective (label mp).
foreach(mode barrier allreduce)
  mpp_mp_test(comm_abort NRANKS 2 TESTNAME comm_abort_${mode}_n2 ARGS ${mode} SOURCES ${CMAKE_CURRENT_LIST_DIR}/comm_abort.c)
  set_tests_properties(comm_abort_${mode}_n2 PROPERTIES TIMEOUT 60)
endforeach()

# Misuse of handles (destroyed, double destroy, garbage, destroy with a queued group call) and the
# thread rule (one thread at a time; queries from any thread): errors, never crashes (docs/errors.md).
mpp_mp_test(comm_misuse NRANKS 1 TESTNAME comm_misuse_handles ARGS handles SOURCES ${CMAKE_CURRENT_LIST_DIR}/comm_misuse.c)
mpp_mp_test(comm_misuse NRANKS 2 TESTNAME comm_misuse_threads_n2 ARGS threads SOURCES ${CMAKE_CURRENT_LIST_DIR}/comm_misuse.c)
mpp_mp_test(comm_misuse NRANKS 2 TESTNAME comm_misuse_objects_n2 ARGS objects SOURCES ${CMAKE_CURRENT_LIST_DIR}/comm_misuse.c)
set_tests_properties(comm_misuse_handles comm_misuse_threads_n2 comm_misuse_objects_n2 PROPERTIES TIMEOUT 60)

# Issue 22 item 11 for the other handle kinds: connections, host semaphores, registered memory,
# windows, buffer registrations, proxy services, plans, native algorithms used after their destroy,
# destroyed twice, garbage, of another kind, and after their communicator's destroy (docs/errors.md).
mpp_mp_test(handle_misuse NRANKS 2 TESTNAME handle_misuse_tcp ARGS tcp SOURCES ${CMAKE_CURRENT_LIST_DIR}/handle_misuse.c)
mpp_mp_test(handle_misuse NRANKS 2 TESTNAME handle_misuse_shm ARGS shm SOURCES ${CMAKE_CURRENT_LIST_DIR}/handle_misuse.c)
set_tests_properties(handle_misuse_tcp handle_misuse_shm PROPERTIES TIMEOUT 60)
