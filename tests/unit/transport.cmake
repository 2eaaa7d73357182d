# Unit tests of the registered-memory and transport internals (one process each).
mpp_unit_test(transport_blob ${CMAKE_CURRENT_LIST_DIR}/transport_blob.c)
mpp_unit_test(transport_memalloc ${CMAKE_CURRENT_LIST_DIR}/transport_memalloc.c)
mpp_unit_test(transport_regtable ${CMAKE_CURRENT_LIST_DIR}/transport_regtable.c)
mpp_unit_test(transport_fdpass ${CMAKE_CURRENT_LIST_DIR}/transport_fdpass.c)
# Strangers at the fd service: idle connections delay no real fetch, no fd without the key.
mpp_unit_test(transport_fdflood ${CMAKE_CURRENT_LIST_DIR}/transport_fdflood.c)
