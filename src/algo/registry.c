/* registry.c - every built-in algorithm by name. GPU algorithms add rows here (kind
 * mscclppRankGpu); the first row of a collective and kind is its default. */
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/cpu/net.h"

static const struct algo_desc registry[] = {
    {.name = "cpu_allreduce_rsag", .coll = ALGO_COLL_ALLREDUCE, .kind = mscclppRankCpu, .run = cpu_allreduce_rsag},
    {.name = "cpu_allreduce_allpairs", .coll = ALGO_COLL_ALLREDUCE, .kind = mscclppRankCpu, .run = cpu_allreduce_allpairs},
    {.name = "cpu_allgather_direct", .coll = ALGO_COLL_ALLGATHER, .kind = mscclppRankCpu, .run = cpu_allgather_direct},
    {.name = "cpu_reducescatter_direct", .coll = ALGO_COLL_REDUCESCATTER, .kind = mscclppRankCpu,
     .run = cpu_reducescatter_direct},
    {.name = "cpu_broadcast_scatter_ag", .coll = ALGO_COLL_BROADCAST, .kind = mscclppRankCpu,
     .run = cpu_broadcast_scatter_ag},
    {.name = "cpu_reduce_rs_gather", .coll = ALGO_COLL_REDUCE, .kind = mscclppRankCpu, .run = cpu_reduce_rs_gather},
    {.name = "cpu_alltoall_direct", .coll = ALGO_COLL_ALLTOALL, .kind = mscclppRankCpu, .run = cpu_alltoall_direct},
};

const struct algo_desc* algo_registry(int* count) {
  *count = (int)(sizeof(registry) / sizeof(registry[0]));
  return registry;
}
