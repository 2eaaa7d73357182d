# Proxy FIFO unit tests: trigger layout and laps, many producers into one proxy thread, full-FIFO
# back-pressure, stop while busy, bounded waits that report themselves.
mpp_unit_test(fifo_layout ${CMAKE_CURRENT_LIST_DIR}/fifo_layout.c)
mpp_unit_test(fifo_threads ${CMAKE_CURRENT_LIST_DIR}/fifo_threads.c)
mpp_unit_test(fifo_backpressure ${CMAKE_CURRENT_LIST_DIR}/fifo_backpressure.c)
add_test(NAME fifo_threads_tiny COMMAND fifo_threads 8 2000 2)
set_tests_properties(fifo_threads_tiny PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77)
