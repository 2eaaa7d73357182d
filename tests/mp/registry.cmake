# The plan registry (docs/plans.md, "Registry"): the collectives run registered plans where one
# serves the call. Multi-process tests on CPU ranks (label mp), one per mode of plan_registry.c,
# and unit tests of the matching rules and of the registration calls (label unit).
set(_reg_dir ${CMAKE_CURRENT_LIST_DIR})
set(_reg_unit ${PROJECT_SOURCE_DIR}/tests/unit)
set(_reg_xml ${PROJECT_SOURCE_DIR}/tests/xml)
set(_reg_srcs ${_reg_dir}/plan_registry.c ${_reg_dir}/plan_registry_env.c ${_reg_dir}/plan_registry_plans.c)

foreach(mode select env baddir xml badxml)
  mpp_mp_test(plan_registry NRANKS 4 TESTNAME plan_registry_${mode}_n4 ARGS ${mode} SOURCES ${_reg_srcs})
  set_tests_properties(plan_registry_${mode}_n4 PROPERTIES TIMEOUT 120)
endforeach()
mpp_mp_test(plan_registry NRANKS 2 TESTNAME plan_registry_select_n2 ARGS select SOURCES ${_reg_srcs})
set_tests_properties(plan_registry_xml_n4 PROPERTIES ENVIRONMENT
  "MSCCL_XML_FILES=${_reg_xml}/allpairs_allreduce_ll.xml:${_reg_xml}/ring_allreduce.xml:${_reg_xml}/ring_allgather.xml")
set_tests_properties(plan_registry_badxml_n4 PROPERTIES ENVIRONMENT
  "MSCCL_XML_FILES=${_reg_xml}/ring_allreduce.xml:${_reg_xml}/bad_cycle.xml")

mpp_unit_test(plan_registry_match ${_reg_unit}/plan_registry_match.c ${_reg_dir}/plan_registry_plans.c)
target_compile_definitions(plan_registry_match PRIVATE MPP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
mpp_unit_test(plan_registry_api ${_reg_unit}/plan_registry_api.c ${_reg_dir}/plan_registry_plans.c)
target_compile_definitions(plan_registry_api PRIVATE MPP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
set_tests_properties(plan_registry_match plan_registry_api PROPERTIES ENVIRONMENT "MSCCLPP_LOG_LEVEL=none")
