# The GPU collectives' exchange plans, checked and simulated on the CPU (no GPU needed).
mpp_unit_test(gpu_plan ${CMAKE_CURRENT_LIST_DIR}/gpu_plan.c)
