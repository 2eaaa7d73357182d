# MSCCL XML algorithms: conversion of the samples in tests/xml to plans (structure and results in a
# reference interpreter), the selection rule, and the rejection of broken files.
set(_xml_dir ${CMAKE_CURRENT_LIST_DIR})
mpp_unit_test(xml_convert ${_xml_dir}/xml_convert.c ${_xml_dir}/xml_sim.c)
target_compile_definitions(xml_convert PRIVATE MPP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
mpp_unit_test(xml_select ${_xml_dir}/xml_select.c)
target_compile_definitions(xml_select PRIVATE MPP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
set_tests_properties(xml_select PROPERTIES ENVIRONMENT MSCCLPP_LOG_LEVEL=none)
# End to end on 4 CPU ranks, one test per sample: convert, load, execute, check (label mp).
# Registered once the CPU executor (src/exec/cpu, mscclppExecutePlan) is part of the library.
get_target_property(_xml_lib_srcs mscclpp_obj SOURCES)
if("${_xml_lib_srcs}" MATCHES "exec/cpu/")
  foreach(_xml_sample ring_allreduce ring_allreduce_ll allpairs_allreduce_ll ring_allgather allpairs_allreduce_cpy_re
                      allpairs_allreduce_cpy_re_ll)
    mpp_mp_test(xml_run NRANKS 4 TESTNAME xml_run_${_xml_sample}_n4
                ARGS ${PROJECT_SOURCE_DIR}/tests/xml/${_xml_sample}.xml SOURCES ${_xml_dir}/xml_run.c)
    set_tests_properties(xml_run_${_xml_sample}_n4 PROPERTIES TIMEOUT 120)
  endforeach()
  mpp_mp_test(xml_run NRANKS 2 TESTNAME xml_run_ring_allreduce_n2
              ARGS ${PROJECT_SOURCE_DIR}/tests/xml/ring_allreduce_n2.xml SOURCES ${_xml_dir}/xml_run.c)
  set_tests_properties(xml_run_ring_allreduce_n2 PROPERTIES TIMEOUT 120)
  mpp_mp_test(xml_run NRANKS 3 TESTNAME xml_run_ring_allgather_cpy_n3
              ARGS ${PROJECT_SOURCE_DIR}/tests/xml/ring_allgather_cpy.xml SOURCES ${_xml_dir}/xml_run.c)
  set_tests_properties(xml_run_ring_allgather_cpy_n3 PROPERTIES TIMEOUT 120)
endif()
# The tool's convert subcommand turns a sample into a plan that the validator accepts.
add_test(NAME xml_tool_convert
         COMMAND sh -c "$<TARGET_FILE:mscclpp-plan> convert ${PROJECT_SOURCE_DIR}/tests/xml/ring_allreduce.xml -o xml_tool_ring.json && $<TARGET_FILE:mscclpp-plan> validate xml_tool_ring.json")
set_tests_properties(xml_tool_convert PROPERTIES LABELS unit TIMEOUT 60)
