/* state.c - the CPU executor's per-communicator state (COMM_EXT_EXEC): the sync and data regions
 * shared with every rank, the rank barrier, per-plan state. See cpu.h for the memory layout. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <mscclpp/atomics.h>

#include "core/comm.h"
#include "core/connection.h"
#include "exec/cpu/cpu.h"
#include "util/err.h"
#include "util/param.h"

static uint64_t sync_bytes(int nranks) {
  return (uint64_t)nranks * sizeof(struct exec_sync_slot) + 2ull * (uint64_t)nranks * EXEC_MAX_ORD * sizeof(uint64_t);
}

uint64_t exec_sem_offset(const struct exec_cpu* st, int type, int sender, int ord) {
  uint64_t i = ((uint64_t)(type - 1) * (uint64_t)st->nranks + (uint64_t)sender) * EXEC_MAX_ORD + (uint64_t)ord;
  return (uint64_t)st->nranks * sizeof(struct exec_sync_slot) + i * sizeof(uint64_t);
}

uint64_t* exec_sem_counter(struct exec_cpu* st, int owner, int type, int sender, int ord) {
  return (uint64_t*)(void*)(st->peer_sync[owner] + exec_sem_offset(st, type, sender, ord));
}

/* Frees what plan_state_init allocated (any part may be missing). */
static void plan_state_free(struct exec_plan_state* ps) {
  for (int b = 0; b < ps->nblocks; b++) {
    if (ps->temp) free(ps->temp[b]);
    if (ps->rtemp) free(ps->rtemp[b]);
  }
  free(ps->temp), free(ps->rtemp), free(ps->bar_count), free(ps->bar_round), free(ps->sems), free(ps->errs), free(ps->rcs);
}

static void release_data(struct exec_cpu* st) {
  if (!st->have_data) return;
  mscclppRegisteredMemoryRelease(&st->data_reg);
  mscclppMemFree(st->data);
  st->data = NULL, st->data_cap = 0, st->have_data = 0;
}

static void state_fini(struct mscclppComm* comm, void* state, int abort) {
  (void)comm;
  struct exec_cpu* st = state;
  exec_pool_destroy(st->pool);
  exec_remote_close(st, abort);
  release_data(st);
  if (st->sync) {
    mscclppRegisteredMemoryRelease(&st->sync_reg);
    mscclppMemFree(st->sync);
  }
  for (int i = 0; i < EXEC_PLAN_CACHE; i++) plan_state_free(&st->plans[i]);
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

/* Maps every rank's registered region: own pointer for this rank, imported ones for the others
 * (NULL for a rank of another host, reached over tcp instead). `like`: the sync regions' mapping,
 * which the data regions' must follow (NULL when mapping the sync regions). */
static mscclppResult_t map_peers(struct exec_cpu* st, mscclppRegisteredMemory* reg, char* own, char** peers,
                                 char* const* like) {
  for (int r = 0; r < st->nranks; r++) {
    void* p = own;
    if (r != st->rank) MPP_CHECK(mscclppRegMemInfo(reg->remote[r], &p, NULL, NULL));
    if (like && (p == NULL) != (like[r] == NULL))
      return MPP_ERR(mscclppInternalError, "executor: rank %d's data region is %smapped here but its sync region is %s", r,
                     p ? "" : "not ", like[r] ? "mapped" : "not");
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
    MPP_CHECK(map_peers(st, &st->sync_reg, st->sync, st->peer_sync, NULL));
    MPP_CHECK(exec_remote_open(st));
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
  return map_peers(st, &st->data_reg, st->data, st->peer_data, st->peer_sync);
}

/* Writes this rank's slot (arrival k; offsets != 0: its mirror offsets first) into rank r's sync
 * region: stores for a mapped rank, over tcp for another host's. */
static mscclppResult_t publish_slot(struct exec_cpu* st, int r, uint64_t k, int offsets) {
  struct exec_sync_slot* own = exec_slot(st->sync, st->rank);
  uint64_t at = (uint64_t)st->rank * sizeof(struct exec_sync_slot);
  if (!st->peer_sync[r]) {
    if (offsets)
      MPP_CHECK(exec_remote_write(st, r, 1, at + offsetof(struct exec_sync_slot, in_off), &own->in_off, 3 * sizeof(uint64_t)));
    return exec_remote_store(st, r, at, k); /* lands after the offsets */
  }
  struct exec_sync_slot* theirs = exec_slot(st->peer_sync[r], st->rank);
  if (offsets && theirs != own) theirs->in_off = own->in_off, theirs->out_off = own->out_off, theirs->scr_off = own->scr_off;
  /* release: this rank's writes (offsets, mirrors, data into r's memory) are visible to r once it sees k */
  mscclppStoreRelease64(&theirs->arrive, k);
  return mscclppSuccess;
}

mscclppResult_t exec_peer_alive(struct exec_cpu* st, int r) {
  if (r == st->rank) return mscclppSuccess;
  if (!st->peer_sync[r]) return exec_remote_alive(st, r); /* another host */
  return comm_peer_alive(st->comm, r);
}

mscclppResult_t exec_rank_barrier(struct exec_cpu* st, int offsets) {
  uint64_t k = ++st->barriers;
  for (int r = 0; r < st->nranks; r++) MPP_CHECK(publish_slot(st, r, k, offsets));
  uint64_t t0 = mscclppNowNs();
  for (int r = 0; r < st->nranks; r++) {
    const uint64_t* a = &exec_slot(st->sync, r)->arrive;
    for (uint32_t spins = 0; mscclppLoadAcquire64(a) < k; spins++) {
      if ((spins & 63u) == 63u) sched_yield();
      if ((spins & 1023u) != 0) continue;
      mscclppResult_t alive = spins && (spins & 8191u) == 0 ? exec_peer_alive(st, r) : exec_remote_alive(st, r);
      if (alive != mscclppSuccess && mscclppLoadAcquire64(a) < k) return alive; /* (it may have arrived, then exited) */
      if ((int64_t)(mscclppNowNs() - t0) > st->timeout_ns)
        return MPP_ERR(mscclppTimeout, "executor: rank %d waited %lld ms for rank %d at the rank barrier (%llu)", st->rank,
                       (long long)(st->timeout_ns / 1000000), r, (unsigned long long)k);
    }
  }
  return mscclppSuccess;
}

/* Most references of one op of the rank's blocks, or members of one switch group (at least 1). */
static uint32_t plan_max_refs(const struct plan_rank* pr) {
  uint32_t maxrefs = 1;
  for (int b = 0; b < pr->nblocks; b++)
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++) {
      uint32_t n = (uint32_t)pr->blocks[b].ops[i].nsrc + pr->blocks[b].ops[i].ndst;
      if (n > maxrefs) maxrefs = n;
    }
  for (int i = 0; i < pr->nswitch; i++)
    if ((uint32_t)pr->sw[i].nranks > maxrefs) maxrefs = (uint32_t)pr->sw[i].nranks;
  return maxrefs;
}

/* remote: the communicator reaches some rank over tcp (each block gets its EXEC_RTILE tiles). */
static mscclppResult_t plan_state_init(struct exec_plan_state* ps, const struct mscclppPlan* p, const struct plan_rank* pr,
                                       int remote) {
  ps->plan_id = p->id, ps->nblocks = pr->nblocks;
  ps->bar_count = calloc((size_t)pr->nbarriers + 1, sizeof(uint64_t));
  ps->bar_round = calloc((size_t)pr->nbarriers + 1, sizeof(uint64_t));
  ps->sems = calloc((size_t)pr->nsems + 1, sizeof(int64_t));
  ps->temp = calloc((size_t)pr->nblocks + 1, sizeof(char*));
  ps->rtemp = remote ? calloc((size_t)pr->nblocks + 1, sizeof(char*)) : NULL;
  ps->errs = calloc((size_t)pr->nblocks + 1, EXEC_ERR_LEN);
  ps->rcs = calloc((size_t)pr->nblocks + 1, sizeof(int));
  if (!ps->errs || !ps->rcs || !ps->bar_count || !ps->bar_round || !ps->sems || !ps->temp || (remote && !ps->rtemp))
    return MPP_ERR(mscclppSystemError, "executor: out of memory");
  ps->maxrefs = plan_max_refs(pr);
  for (int b = 0; b < pr->nblocks; b++) {
    /* tiles of packet sources, then room for two pointer arrays (exec_temp_ptrs) */
    ps->temp[b] = malloc((size_t)(EXEC_TILE + 2 * sizeof(void*)) * (ps->maxrefs + 1));
    if (!ps->temp[b]) return MPP_ERR(mscclppSystemError, "executor: out of memory");
    if (remote && !(ps->rtemp[b] = malloc((size_t)EXEC_RTILE * (ps->maxrefs + 3))))
      return MPP_ERR(mscclppSystemError, "executor: out of memory");
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
  plan_state_free(ps);
  memset(ps, 0, sizeof(*ps));
  mscclppResult_t res = plan_state_init(ps, p, pr, st->rem != NULL);
  if (res != mscclppSuccess) ps->plan_id = 0;
  *out = ps;
  return res;
}
