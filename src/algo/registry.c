/* registry.c - every built-in algorithm by name, CPU and GPU (algo/gpu/algos.c); the first row of a
 * collective and kind is its default. */
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/cpu/hier.h"
#include "algo/cpu/net.h"
#include "algo/gpu/gpu.h"
#include "algo/gpu/xhost.h"

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
    /* Across hosts (hier.h): chosen by the table's hosts= rules, never a collective's default. */
    {.name = "cpu_allreduce_hier", .coll = ALGO_COLL_ALLREDUCE, .kind = mscclppRankCpu, .run = cpu_allreduce_hier},
    {.name = "cpu_allgather_hier", .coll = ALGO_COLL_ALLGATHER, .kind = mscclppRankCpu, .run = cpu_allgather_hier},
    {.name = "cpu_reducescatter_hier", .coll = ALGO_COLL_REDUCESCATTER, .kind = mscclppRankCpu,
     .run = cpu_reducescatter_hier},
    {.name = "cpu_broadcast_hier", .coll = ALGO_COLL_BROADCAST, .kind = mscclppRankCpu, .run = cpu_broadcast_hier},
    {.name = "cpu_alltoall_hier", .coll = ALGO_COLL_ALLTOALL, .kind = mscclppRankCpu, .run = cpu_alltoall_hier},
#define GPU_ROW(n, c) {.name = #n, .coll = c, .kind = mscclppRankGpu, .run = n}
    GPU_ROW(gpu_allreduce_bulk, ALGO_COLL_ALLREDUCE),
    GPU_ROW(gpu_allreduce_ll1, ALGO_COLL_ALLREDUCE),
    GPU_ROW(gpu_allreduce_ll2, ALGO_COLL_ALLREDUCE),
    GPU_ROW(gpu_allreduce_bulk1, ALGO_COLL_ALLREDUCE),
    GPU_ROW(gpu_allgather_bulk, ALGO_COLL_ALLGATHER),
    GPU_ROW(gpu_allgather_ll, ALGO_COLL_ALLGATHER),
    GPU_ROW(gpu_reducescatter_bulk, ALGO_COLL_REDUCESCATTER),
    GPU_ROW(gpu_reducescatter_ll, ALGO_COLL_REDUCESCATTER),
    GPU_ROW(gpu_broadcast_bulk, ALGO_COLL_BROADCAST),
    GPU_ROW(gpu_broadcast_ll, ALGO_COLL_BROADCAST),
    GPU_ROW(gpu_reduce_bulk, ALGO_COLL_REDUCE),
    GPU_ROW(gpu_reduce_ll, ALGO_COLL_REDUCE),
    GPU_ROW(gpu_alltoall_bulk, ALGO_COLL_ALLTOALL),
    GPU_ROW(gpu_alltoall_ll, ALGO_COLL_ALLTOALL),
#define STAGE_ROW(n, c) {.name = n, .coll = c, .kind = mscclppRankGpu, .run = gpu_coll_stage}
    STAGE_ROW("gpu_allreduce_stage", ALGO_COLL_ALLREDUCE),
    STAGE_ROW("gpu_allgather_stage", ALGO_COLL_ALLGATHER),
    STAGE_ROW("gpu_reducescatter_stage", ALGO_COLL_REDUCESCATTER),
    STAGE_ROW("gpu_alltoall_stage", ALGO_COLL_ALLTOALL),
    STAGE_ROW("gpu_broadcast_stage", ALGO_COLL_BROADCAST),
    STAGE_ROW("gpu_reduce_stage", ALGO_COLL_REDUCE),
#undef STAGE_ROW
#define XH_ROW(n, f, c) {.name = n, .coll = c, .kind = mscclppRankGpu, .run = f}
    XH_ROW("gpu_allreduce_hier", gpu_coll_hier, ALGO_COLL_ALLREDUCE),
    XH_ROW("gpu_allgather_hier", gpu_coll_hier, ALGO_COLL_ALLGATHER),
    XH_ROW("gpu_reducescatter_hier", gpu_coll_hier, ALGO_COLL_REDUCESCATTER),
    XH_ROW("gpu_broadcast_hier", gpu_coll_hier, ALGO_COLL_BROADCAST),
    XH_ROW("gpu_allreduce_host", gpu_coll_host, ALGO_COLL_ALLREDUCE),
    XH_ROW("gpu_allgather_host", gpu_coll_host, ALGO_COLL_ALLGATHER),
    XH_ROW("gpu_reducescatter_host", gpu_coll_host, ALGO_COLL_REDUCESCATTER),
    XH_ROW("gpu_broadcast_host", gpu_coll_host, ALGO_COLL_BROADCAST),
    XH_ROW("gpu_reduce_host", gpu_coll_host, ALGO_COLL_REDUCE),
    XH_ROW("gpu_alltoall_host", gpu_coll_host, ALGO_COLL_ALLTOALL),
#define ZC_ROW(n, f, c) {.name = n, .coll = c, .kind = mscclppRankGpu, .run = f, .graph_only = 1}
    ZC_ROW("gpu_allreduce_zc", gpu_coll_zc, ALGO_COLL_ALLREDUCE),
    ZC_ROW("gpu_allgather_zc", gpu_coll_zc, ALGO_COLL_ALLGATHER),
    ZC_ROW("gpu_reducescatter_zc", gpu_coll_zc, ALGO_COLL_REDUCESCATTER),
    ZC_ROW("gpu_alltoall_zc", gpu_coll_zc, ALGO_COLL_ALLTOALL),
    ZC_ROW("gpu_broadcast_zc", gpu_coll_zc, ALGO_COLL_BROADCAST),
    ZC_ROW("gpu_reduce_zc", gpu_coll_zc, ALGO_COLL_REDUCE),
#undef ZC_ROW
#undef GPU_ROW
};

const struct algo_desc* algo_registry(int* count) {
  *count = (int)(sizeof(registry) / sizeof(registry[0]));
  return registry;
}
