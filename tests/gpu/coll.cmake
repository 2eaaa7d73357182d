# GPU tests of the built-in collectives (label gpu; 77 = skipped without enough GPUs): every
# collective x datatype x operator x in/out of place at odd sizes, per algorithm family, on 2 and 4
# ranks (the 4-rank runs skip on a 2-GPU machine), and the zero-copy and staged families and the table on 8.
# C, public API plus src/algo/verify.h.
set(GDIR ${CMAKE_CURRENT_LIST_DIR})
foreach(variant ll ll2 bulk1 bulk table zc zcg zcw zcwc zcr st stg stp)
  set(_ranks 2 4)
  if(variant STREQUAL "table" OR variant STREQUAL "zc" OR variant STREQUAL "st")
    list(APPEND _ranks 8)
  endif()
  foreach(n ${_ranks})
    mpp_gpu_test(coll_gpu NRANKS ${n} TESTNAME coll_gpu_${variant}_n${n} ARGS ${variant} SOURCES ${GDIR}/coll_gpu.c)
  endforeach()
endforeach()
