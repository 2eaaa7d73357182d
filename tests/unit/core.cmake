# Unit tests of the core runtime (errors, parameters, logging) and of the public headers.
mpp_unit_test(core_util ${CMAKE_CURRENT_LIST_DIR}/core_util.c)
mpp_unit_test(header_cxx ${CMAKE_CURRENT_LIST_DIR}/header_cxx.cpp)
