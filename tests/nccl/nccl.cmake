# The NCCL-compatible library (nccl/, docs/nccl.md). Its test programs are clients of nccl.h only:
# they link libmscclpp_nccl.so, as a program built for NCCL would, and run on CPU ranks.
function(nccl_test_target name)
  add_executable(${name} ${ARGN} ${PROJECT_SOURCE_DIR}/tests/crash_report.c)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE mscclpp_nccl Threads::Threads ${CMAKE_DL_LIBS} m)
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  # they need libnccl.so.2 (the library's soname), found in lib/nccl
  set_target_properties(${name} PROPERTIES BUILD_RPATH "${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/nccl;${CMAKE_LIBRARY_OUTPUT_DIRECTORY}")
endfunction()

nccl_test_target(nccl_abi ${CMAKE_CURRENT_LIST_DIR}/nccl_abi.c)
add_test(NAME nccl_abi COMMAND nccl_abi ${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/nccl/libnccl.so.2)
# nccl.h also as C++ (a translation unit that only includes it and checks a few values).
add_library(nccl_header_cxx OBJECT ${CMAKE_CURRENT_LIST_DIR}/nccl_header.cc)
target_include_directories(nccl_header_cxx PRIVATE ${PROJECT_SOURCE_DIR}/nccl/include)

nccl_test_target(nccl_seq ${CMAKE_CURRENT_LIST_DIR}/nccl_seq.c)
foreach(seq pytorch cupy errors vllm shrink)
  foreach(n 1 2 4)
    add_test(NAME nccl_seq_${seq}_n${n} COMMAND mscclpp-run -n ${n} $<TARGET_FILE:nccl_seq> ${seq}
             ${CMAKE_CURRENT_BINARY_DIR}/nccl_seq_${seq}_n${n}.id)
  endforeach()
endforeach()
add_test(NAME nccl_seq_pytorch_n3 COMMAND mscclpp-run -n 3 $<TARGET_FILE:nccl_seq> pytorch
         ${CMAKE_CURRENT_BINARY_DIR}/nccl_seq_pytorch_n3.id)

nccl_test_target(nccl_threads ${CMAKE_CURRENT_LIST_DIR}/nccl_threads.c)
add_test(NAME nccl_threads_initall_n4 COMMAND nccl_threads initall 4)
add_test(NAME nccl_threads_group_n4 COMMAND nccl_threads group 4)
add_test(NAME nccl_threads_group_n3 COMMAND nccl_threads group 3)
add_test(NAME nccl_threads_onethread_n4 COMMAND nccl_threads onethread 4)
add_test(NAME nccl_threads_disco_n4 COMMAND nccl_threads disco 4)

set_tests_properties(nccl_abi nccl_threads_initall_n4 nccl_threads_group_n4 nccl_threads_group_n3
                     nccl_threads_onethread_n4 nccl_threads_disco_n4
                     PROPERTIES LABELS unit TIMEOUT 120)
foreach(seq pytorch cupy errors vllm shrink)
  foreach(n 1 2 4)
    set_tests_properties(nccl_seq_${seq}_n${n} PROPERTIES LABELS mp TIMEOUT 300)
  endforeach()
endforeach()
set_tests_properties(nccl_seq_pytorch_n3 PROPERTIES LABELS mp TIMEOUT 300)

# The fallback to a real NCCL, with a fake one (fake_nccl.c) standing in for it.
add_library(fake_nccl SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_nccl.c)
target_include_directories(fake_nccl PRIVATE ${PROJECT_SOURCE_DIR}/nccl/include)
target_compile_definitions(fake_nccl PRIVATE MSCCLPP_NCCL_NO_CUDA_HEADERS=1)
set_target_properties(fake_nccl PROPERTIES OUTPUT_NAME fakenccl)
nccl_test_target(nccl_fallback ${CMAKE_CURRENT_LIST_DIR}/nccl_fallback.c)
add_dependencies(nccl_fallback fake_nccl)
add_test(NAME nccl_fallback_forward_n3 COMMAND mscclpp-run -n 3 $<TARGET_FILE:nccl_fallback> forward
         ${CMAKE_CURRENT_BINARY_DIR}/nccl_fallback_forward.id)
set_tests_properties(nccl_fallback_forward_n3 PROPERTIES LABELS mp TIMEOUT 120
  ENVIRONMENT "MSCCLPP_NCCL_LIB_PATH=$<TARGET_FILE:fake_nccl>;MSCCLPP_NCCL_FALLBACK=allreduce")
add_test(NAME nccl_fallback_preloaded_n2 COMMAND mscclpp-run -n 2 $<TARGET_FILE:nccl_fallback> preloaded
         ${CMAKE_CURRENT_BINARY_DIR}/nccl_fallback_preloaded.id)
set_tests_properties(nccl_fallback_preloaded_n2 PROPERTIES LABELS mp TIMEOUT 120
  ENVIRONMENT "MSCCLPP_NCCL_LIB_PATH=$<TARGET_FILE:fake_nccl>;MSCCLPP_NCCL_FALLBACK=allreduce")
add_test(NAME nccl_fallback_missing_n2 COMMAND mscclpp-run -n 2 $<TARGET_FILE:nccl_fallback> missing
         ${CMAKE_CURRENT_BINARY_DIR}/nccl_fallback_missing.id)
set_tests_properties(nccl_fallback_missing_n2 PROPERTIES LABELS mp TIMEOUT 120 ENVIRONMENT "MSCCLPP_NCCL_FALLBACK=allreduce")
add_test(NAME nccl_fallback_self_n2 COMMAND mscclpp-run -n 2 $<TARGET_FILE:nccl_fallback> self
         ${CMAKE_CURRENT_BINARY_DIR}/nccl_fallback_self.id)
set_tests_properties(nccl_fallback_self_n2 PROPERTIES LABELS mp TIMEOUT 120
  ENVIRONMENT "MSCCLPP_NCCL_LIB_PATH=$<TARGET_FILE:mscclpp_nccl>;MSCCLPP_NCCL_FALLBACK=allreduce")
