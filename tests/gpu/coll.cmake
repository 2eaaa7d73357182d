# GPU tests of the built-in collectives (label gpu; 77 = skipped without enough GPUs): every
# collective x datatype x operator x in/out of place at odd sizes, per algorithm family, on 2 and 4
# ranks (the 4-rank runs skip on a 2-GPU machine). C, public API plus src/algo/verify.h.
set(GDIR ${CMAKE_CURRENT_LIST_DIR})
foreach(variant ll ll2 bulk1 bulk table zc)
  foreach(n 2 4)
    mpp_gpu_test(coll_gpu NRANKS ${n} TESTNAME coll_gpu_${variant}_n${n} ARGS ${variant} SOURCES ${GDIR}/coll_gpu.c)
  endforeach()
endforeach()
