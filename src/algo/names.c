/* names.c - names of the collectives (messages, the tuning table, tools). */
#include "algo/algo.h"

const char* algo_coll_name(enum algo_coll coll) {
  static const char* const names[ALGO_COLL_COUNT] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                                     "reduce",    "alltoall",  "sendrecv"};
  return (int)coll >= 0 && coll < ALGO_COLL_COUNT ? names[coll] : "collective";
}

int algo_coll_rooted(enum algo_coll coll) { return coll == ALGO_COLL_BROADCAST || coll == ALGO_COLL_REDUCE; }

int algo_coll_reduces(enum algo_coll coll) {
  return coll == ALGO_COLL_ALLREDUCE || coll == ALGO_COLL_REDUCESCATTER || coll == ALGO_COLL_REDUCE;
}
