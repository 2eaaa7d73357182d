/* state.c - the CPU executor's per-communicator state (COMM_EXT_EXEC): the sync and data regions
 * shared with every rank, the rank barrier, per-plan state. See cpu.h for the memory layout. */
#include <stdlib.h>
#include <string.h>

#include <mscclpp/atomics.h>

#include "core/comm.h"
#include "exec/cpu/cpu.h"
#include "util/err.h"
#include "util/param.h"

static uint64_t sync_bytes(int nranks) {
  return sizeof(struct exec_sync_hdr) + 2ull * (uint64_t)nranks * EXEC_MAX_ORD * sizeof(uint64_t);
}

uint64_t* exec_sem_counter(struct exec_cpu* st, int owner, int type, int sender, int ord) {
  uint64_t* c = (uint64_t*)(st->peer_sync[owner] + sizeof(struct exec_sync_hdr));
  return &c[((uint64_t)(type - 1) * (uint64_t)st->nranks + (uint64_t)sender) * EXEC_MAX_ORD + (uint64_t)ord];
}

static void release_data(struct exec_cpu* st) {
  if (!st->have_data) return;
  mscclppRegisteredMemoryRelease(&st->data_reg);
  mscclppMemFree(st->data);
  st->data = NULL, st->data_cap = 0, st->have_data = 0;
}

static void state_fini(struct mscclppComm* comm, void* state, int abort) {
  (void)comm, (void)abort;
  struct exec_cpu* st = state;
  exec_pool_destroy(st->pool);
  release_data(st);
  if (st->sync) {
    mscclppRegisteredMemoryRelease(&st->sync_reg);
    mscclppMemFree(st->sync);
  }
  for (int i = 0; i < EXEC_PLAN_CACHE; i++) {
    struct exec_plan_state* ps = &st->plans[i];
    for (int b = 0; ps->temp && b < ps->nblocks; b++) free(ps->temp[b]);
    free(ps->temp), free(ps->bar_count), free(ps->bar_round), free(ps->sems), free(ps->errs), free(ps->rcs);
  }
  free(st->peer_sync), free(st->peer_data), free(st->expected), free(st->peer_off);
  free(st);
}

static mscclppResult_t state_make(struct mscclppComm* comm, void** out) {
  struct exec_cpu* st = calloc(1, sizeof(*st));
  if (!st) return MPP_ERR(mscclppSystemError, "executor: out of memory");
  st->comm = comm, st->rank = comm->rank, st->nranks = comm->nranks;
  st->timeout_ns = param_int(PARAM_EXEC_TIMEOUT_MS) * 1000000ll;
  st->peer_sync = calloc((size_t)comm->nranks, sizeof(char*));
  st->peer_data = calloc((size_t)comm->nranks, sizeof(char*));
  st->peer_off = calloc((size_t)comm->nranks * 3, sizeof(uint64_t));
  st->expected = calloc(2ull * (size_t)comm->nranks * EXEC_MAX_ORD, sizeof(uint64_t));
  if (!st->peer_sync || !st->peer_data || !st->peer_off || !st->expected) {
    state_fini(comm, st, 0);
    return MPP_ERR(mscclppSystemError, "executor: out of memory");
  }
  *out = st;
  return mscclppSuccess;
}

/* Maps every rank's registered region: own pointer for this rank, imported ones for the others. */
static mscclppResult_t map_peers(struct exec_cpu* st, mscclppRegisteredMemory* reg, char* own, char** peers) {
  for (int r = 0; r < st->nranks; r++) {
    void* p = own;
    if (r != st->rank) MPP_CHECK(mscclppRegMemInfo(reg->remote[r], &p, NULL, NULL));
    if (!p)
      return MPP_ERR(mscclppInvalidUsage, "executor: rank %d's memory is not mapped here; the CPU executor needs all "
                     "ranks on one host", r);
    peers[r] = p;
  }
  return mscclppSuccess;
}

mscclppResult_t exec_cpu_get(struct mscclppComm* comm, struct exec_cpu** out) {
  void* s;
  MPP_CHECK(comm_ext_get(comm, COMM_EXT_EXEC, state_make, state_fini, &s));
  struct exec_cpu* st = s;
  if (!st->sync) { /* first call: collective on every rank */
    uint64_t n = sync_bytes(st->nranks);
    MPP_CHECK(mscclppMemAlloc((void**)&st->sync, n, mscclppMemHost));
    mscclppResult_t res = mscclppRegisterBuffer(comm, st->sync, n, &st->sync_reg);
    if (res != mscclppSuccess) {
      mscclppMemFree(st->sync);
      st->sync = NULL;
      return res;
    }
    MPP_CHECK(map_peers(st, &st->sync_reg, st->sync, st->peer_sync));
  }
  *out = st;
  return mscclppSuccess;
}

/* Grows the data region to at least bytes (collective: every rank decides the same, from the
 * plan and the sizes). Peers are past the previous call's last barrier, so none touches it. */
mscclppResult_t exec_cpu_data(struct exec_cpu* st, uint64_t bytes) {
  if (st->have_data && bytes <= st->data_cap) return mscclppSuccess;
  uint64_t cap = 1u << 20;
  while (cap < bytes) cap *= 2;
  release_data(st);
  MPP_CHECK(mscclppMemAlloc((void**)&st->data, cap, mscclppMemHost));
  mscclppResult_t res = mscclppRegisterBuffer(st->comm, st->data, cap, &st->data_reg);
  if (res != mscclppSuccess) {
    mscclppMemFree(st->data);
    st->data = NULL;
    return res;
  }
  st->data_cap = cap, st->have_data = 1;
  return map_peers(st, &st->data_reg, st->data, st->peer_data);
}

mscclppResult_t exec_rank_barrier(struct exec_cpu* st) {
  uint64_t k = ++st->barriers;
  /* release: this rank's writes (mirror offsets, data) are visible to a peer that sees k */
  mscclppStoreRelease64(&((struct exec_sync_hdr*)st->sync)->arrive, k);
  uint64_t t0 = mscclppNowNs();
  for (int r = 0; r < st->nranks; r++) {
    const uint64_t* a = &((struct exec_sync_hdr*)st->peer_sync[r])->arrive;
    for (uint32_t spins = 0; mscclppLoadAcquire64(a) < k; spins++) {
      if ((spins & 63u) == 63u) sched_yield();
      if ((spins & 1023u) == 0 && (int64_t)(mscclppNowNs() - t0) > st->timeout_ns)
        return MPP_ERR(mscclppTimeout, "executor: rank %d waited %lld ms for rank %d at the rank barrier (%llu)", st->rank,
                       (long long)(st->timeout_ns / 1000000), r, (unsigned long long)k);
    }
  }
  return mscclppSuccess;
}

static mscclppResult_t plan_state_init(struct exec_plan_state* ps, const struct mscclppPlan* p, const struct plan_rank* pr) {
  ps->plan_id = p->id, ps->nblocks = pr->nblocks;
  ps->bar_count = calloc((size_t)pr->nbarriers + 1, sizeof(uint64_t));
  ps->bar_round = calloc((size_t)pr->nbarriers + 1, sizeof(uint64_t));
  ps->sems = calloc((size_t)pr->nsems + 1, sizeof(int64_t));
  ps->temp = calloc((size_t)pr->nblocks + 1, sizeof(char*));
  ps->errs = calloc((size_t)pr->nblocks + 1, EXEC_ERR_LEN);
  ps->rcs = calloc((size_t)pr->nblocks + 1, sizeof(int));
  if (!ps->errs || !ps->rcs || !ps->bar_count || !ps->bar_round || !ps->sems || !ps->temp) return MPP_ERR(mscclppSystemError, "executor: out of memory");
  for (int b = 0; b < pr->nblocks; b++) {
    uint32_t maxrefs = 1;
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++) {
      uint32_t n = (uint32_t)pr->blocks[b].ops[i].nsrc + pr->blocks[b].ops[i].ndst;
      if (n > maxrefs) maxrefs = n;
    }
    for (int i = 0; i < pr->nswitch; i++)
      if ((uint32_t)pr->sw[i].nranks > maxrefs) maxrefs = (uint32_t)pr->sw[i].nranks;
    /* tiles of packet sources, then room for two pointer arrays (exec_temp_ptrs) */
    ps->temp[b] = malloc((size_t)(EXEC_TILE + 2 * sizeof(void*)) * (maxrefs + 1));
    ps->maxrefs = maxrefs;
    if (!ps->temp[b]) return MPP_ERR(mscclppSystemError, "executor: out of memory");
  }
  return mscclppSuccess;
}

mscclppResult_t exec_cpu_plan_state(struct exec_cpu* st, const struct mscclppPlan* p, struct exec_plan_state** out) {
  for (int i = 0; i < EXEC_PLAN_CACHE; i++)
    if (st->plans[i].plan_id == p->id) {
      *out = &st->plans[i];
      return mscclppSuccess;
    }
  const struct plan_rank* pr = &p->ranks[st->rank];
  if (pr->max_ord > EXEC_MAX_ORD)
    return MPP_ERR(mscclppInvalidUsage, "%s: gpu %d has %d channels of one type to one peer; the CPU executor takes at most %d",
                   p->file, st->rank, pr->max_ord, EXEC_MAX_ORD);
  struct exec_plan_state* ps = &st->plans[st->plan_next];
  st->plan_next = (st->plan_next + 1) % EXEC_PLAN_CACHE;
  for (int b = 0; ps->temp && b < ps->nblocks; b++) free(ps->temp[b]);
  free(ps->temp), free(ps->bar_count), free(ps->bar_round), free(ps->sems), free(ps->errs), free(ps->rcs);
  memset(ps, 0, sizeof(*ps));
  mscclppResult_t res = plan_state_init(ps, p, pr);
  if (res != mscclppSuccess) ps->plan_id = 0;
  *out = ps;
  return res;
}
