/* chans.c - the GPU executor's channels: one connection per peer (cuda-ipc on this host; tcp or net
 * to another host, for port channels only), and per (peer, type,
 * ordinal) a memory-channel semaphore or a port channel (a semaphore of the executor's own proxy
 * service with a port that only signals and flushes). Made when a plan first needs more of them
 * than exist (pairwise with each peer, peers in increasing order, connection then memory then
 * port channels: the same order on both sides, so the exchanges meet), kept until teardown.
 * Every slot's handle is copied into fixed device arrays once, so kernels (and captured graphs)
 * index them without the arrays ever moving. Ports with data (dst and src memory) are made for
 * the bindings (bind.c) and found again by (semaphore, dst, src). */
#include "exec/gpu/state.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include <mscclpp/memory_channel.h>

#include "core/comm.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/log.h"

#define XG_CONN_TAG 0x786578 /* "xex": the executor's connections */

static mscclppResult_t slot_arrays(struct xg_state* st) {
  if (st->msem_dev) return mscclppSuccess;
  MPP_CHECK(xg_dev_alloc((void**)&st->msem_dev, XG_MAX_SLOTS * sizeof(mscclppMemoryDevSemaphore), "semaphores"));
  MPP_CHECK(xg_dev_alloc((void**)&st->pch_dev, XG_MAX_SLOTS * sizeof(mscclppPortChannel), "port channels"));
  st->pch_host = calloc(XG_MAX_SLOTS, sizeof(mscclppPortChannel));
  st->pch_sem = calloc(XG_MAX_SLOTS, sizeof(int));
  if (!st->pch_host || !st->pch_sem) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
  return mscclppSuccess;
}

static mscclppResult_t add_mem(struct xg_state* st, int q) {
  int ord = st->nmem[q];
  if (st->nmsem >= XG_MAX_SLOTS)
    return MPP_ERR(mscclppInvalidUsage, "GPU executor: rank %d has all %d memory-channel semaphores", st->rank, XG_MAX_SLOTS);
  mscclppMemoryDevSemaphore sem;
  MPP_CHECK(mscclppMemoryDevSemaphoreCreate(st->comm, st->conn[q], ord, &sem));
  int slot = st->nmsem;
  MPP_CHECK(xg_upload(&st->msem_dev[slot], &sem, sizeof(sem)));
  st->nmsem++;
  st->mem_slot[q * XG_MAX_ORD + ord] = slot;
  st->nmem[q]++;
  return mscclppSuccess;
}

static mscclppResult_t add_port(struct xg_state* st, int q) {
  int ord = st->nport[q], sem = -1;
  if (st->npch >= XG_MAX_SLOTS)
    return MPP_ERR(mscclppInvalidUsage, "GPU executor: rank %d has all %d port channels", st->rank, XG_MAX_SLOTS);
  if (!st->proxy) MPP_CHECK(mscclppProxyServiceCreate(st->comm, 0, &st->proxy));
  MPP_CHECK(mscclppProxyServiceAddSemaphore(st->proxy, st->conn[q], &sem));
  int slot = st->npch;
  MPP_CHECK(mscclppPortChannelCreate(st->proxy, sem, NULL, NULL, ord, &st->pch_host[slot]));
  MPP_CHECK(xg_upload(&st->pch_dev[slot], &st->pch_host[slot], sizeof(mscclppPortChannel)));
  st->pch_sem[slot] = sem;
  st->npch++;
  st->port_slot[q * XG_MAX_ORD + ord] = slot;
  st->nport[q]++;
  if (!st->proxy_running) {
    MPP_CHECK(mscclppProxyServiceStart(st->proxy));
    st->proxy_running = 1;
  }
  return mscclppSuccess;
}

/* cuda-ipc to a peer of this host; to one of another host whatever the two reach (tcp, or net
 * when MSCCLPP_NET_TRANSPORT=on), which carries port channels only (exec_plan_unfit). */
static mscclppTransport_t peer_transport(const struct xg_state* st, int q) {
  return transport_same_host(&st->comm->tc, q) ? mscclppTransportP2P : mscclppTransportAuto;
}

mscclppResult_t xg_chans_ensure(struct xg_state* st, const struct plan_rank* pr) {
  if (pr->max_ord > XG_MAX_ORD)
    return MPP_ERR(mscclppInvalidUsage, "GPU executor: rank %d's plan has %d channels of one type to one peer; at most %d",
                   st->rank, pr->max_ord, XG_MAX_ORD);
  for (int q = 0; q < st->nranks; q++) {
    if (q == st->rank) continue;
    int nm = pr->pair_count[q * 4 + PLAN_CH_MEMORY], np = pr->pair_count[q * 4 + PLAN_CH_PORT];
    if (nm <= st->nmem[q] && np <= st->nport[q]) continue;
    MPP_CHECK(slot_arrays(st));
    if (!st->conn[q]) MPP_CHECK(mscclppConnectionCreate(st->comm, q, XG_CONN_TAG, peer_transport(st, q), &st->conn[q]));
    while (st->nmem[q] < nm) MPP_CHECK(add_mem(st, q));
    while (st->nport[q] < np) MPP_CHECK(add_port(st, q));
    LOG_INFO_(LOG_SUB_EXEC, "GPU executor: rank %d has %d memory and %d port channels to rank %d", st->rank, st->nmem[q],
              st->nport[q], q);
  }
  return mscclppSuccess;
}

mscclppResult_t xg_port_get(struct xg_state* st, int slot, mscclppRegMem_t dst, mscclppRegMem_t src, uint32_t* id) {
  int sem = st->pch_sem[slot];
  for (int i = 0; i < st->nports; i++)
    if (st->ports[i].sem == sem && st->ports[i].dst == dst && st->ports[i].src == src) {
      *id = st->ports[i].id;
      return mscclppSuccess;
    }
  if (st->nports == st->capports) {
    int cap = st->capports ? st->capports * 2 : 64;
    struct xg_port* p = realloc(st->ports, (size_t)cap * sizeof(*p));
    if (!p) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
    st->ports = p, st->capports = cap;
  }
  mscclppPortChannel ch;
  MPP_CHECK(mscclppPortChannelCreate(st->proxy, sem, dst, src, st->pch_host[slot].sem.wait.channel, &ch));
  st->ports[st->nports++] = (struct xg_port){.sem = sem, .dst = dst, .src = src, .id = ch.port};
  *id = ch.port;
  return mscclppSuccess;
}

void xg_chans_fini(struct xg_state* st) {
  if (st->proxy) mscclppProxyServiceDestroy(st->proxy); /* stops its thread first */
  st->proxy = NULL;
  if (st->msem_dev) cudaFree(st->msem_dev);
  if (st->pch_dev) cudaFree(st->pch_dev);
  free(st->pch_host), free(st->pch_sem), free(st->ports);
  /* The connections close with the communicator. */
}

#endif /* MSCCLPP_HAVE_CUDA */
