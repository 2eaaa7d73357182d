/* split.c - communicators made from a parent: ncclCommSplit (by color and key, every parent rank
 * taking part) and ncclCommShrink (the parent without excluded ranks, which need not take part:
 * they may be gone). The child's first rank makes a unique id and sends it to the other members
 * over the parent's bootstrap; each member then initialises the child on the parent's device. */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* Bootstrap tag of the k-th child made from one parent (apart from tags other users pick). */
#define SPLIT_TAG_BASE 0x4e430000

/* Makes this rank's child: members[0..n) are parent ranks in child order, me is this rank's index
 * among them. */
static ncclResult_t make_child(ncclComm_t parent, const int* members, int n, int me, ncclConfig_t* config,
                               ncclComm_t* out, const char* call) {
  int tag = SPLIT_TAG_BASE + (int)(parent->splits++ & 0xffff);
  mscclppUniqueId id;
  mscclppResult_t r = mscclppSuccess;
  if (me == 0) {
    r = mscclppGetUniqueId(&id);
    for (int i = 1; r == mscclppSuccess && i < n; i++) r = mscclppBootstrapSend(parent->c, members[i], tag, &id, sizeof(id));
  } else {
    r = mscclppBootstrapRecv(parent->c, members[0], tag, &id, sizeof(id));
  }
  if (r != mscclppSuccess) return shim_fail_lib(parent, r, call);
  ncclUniqueId nid;
  memcpy(nid.internal, id.internal, sizeof(nid.internal));
  ncclComm_t child;
  ncclResult_t res = shim_comm_new(n, nid, me, config, &child);
  if (res != ncclSuccess) return res;
  child->cfg.cudaDevice = parent->device;
  res = shim_init_now(child);
  if (res != ncclSuccess) {
    shim_comm_free(child);
    return res;
  }
  *out = child;
  return ncclSuccess;
}

struct split_entry {
  int color, key, rank;
};

static int by_key(const void* a, const void* b) {
  const struct split_entry *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

NCCL_API(ncclResult_t, CommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  ncclResult_t res = shim_ready(comm, "ncclCommSplit");
  if (res != ncclSuccess) return res;
  if (!newcomm) return shim_fail(comm, ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  if (color < NCCL_SPLIT_NOCOLOR)
    return shim_fail(comm, ncclInvalidArgument, "ncclCommSplit: color %d (non-negative, or NCCL_SPLIT_NOCOLOR)", color);
  *newcomm = NULL;
  int n = comm->nranks;
  struct split_entry* all = calloc((size_t)n, sizeof(*all));
  int* members = calloc((size_t)n, sizeof(int));
  if (!all || !members) {
    free(all), free(members);
    return shim_fail(comm, ncclSystemError, "ncclCommSplit: out of memory");
  }
  all[comm->rank] = (struct split_entry){color, key, comm->rank};
  mscclppResult_t r = mscclppBootstrapAllGather(comm->c, all, (int)sizeof(*all));
  if (r != mscclppSuccess) res = shim_fail_lib(comm, r, "ncclCommSplit");
  int m = 0, me = -1;
  if (res == ncclSuccess && color != NCCL_SPLIT_NOCOLOR) {
    for (int i = 0; i < n; i++)
      if (all[i].color == color) all[m++] = all[i];
    qsort(all, (size_t)m, sizeof(*all), by_key);
    for (int i = 0; i < m; i++) {
      members[i] = all[i].rank;
      if (all[i].rank == comm->rank) me = i;
    }
    res = make_child(comm, members, m, me, config, newcomm, "ncclCommSplit");
  }
  free(all), free(members);
  return res;
}

NCCL_API(ncclResult_t, CommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
         ncclConfig_t* config, int shrinkFlags) {
  ncclResult_t res = shim_ready(comm, "ncclCommShrink");
  if (res != ncclSuccess) return res;
  if (!newcomm || excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
    return shim_fail(comm, ncclInvalidArgument, "ncclCommShrink: newcomm %p, %d excluded ranks at %p", (void*)newcomm,
                     excludeRanksCount, (void*)excludeRanksList);
  if (shrinkFlags & ~NCCL_SHRINK_ABORT)
    return shim_fail(comm, ncclInvalidArgument, "ncclCommShrink: flags 0x%x", shrinkFlags);
  *newcomm = NULL;
  int n = comm->nranks, m = 0, me = -1;
  char* out = calloc((size_t)n, 1);
  int* members = calloc((size_t)n, sizeof(int));
  if (!out || !members) {
    free(out), free(members);
    return shim_fail(comm, ncclSystemError, "ncclCommShrink: out of memory");
  }
  for (int i = 0; i < excludeRanksCount && res == ncclSuccess; i++) {
    int x = excludeRanksList[i];
    if (x < 0 || x >= n) res = shim_fail(comm, ncclInvalidArgument, "ncclCommShrink: excluded rank %d is not below %d", x, n);
    else out[x] = 1;
  }
  if (res == ncclSuccess && out[comm->rank])
    res = shim_fail(comm, ncclInvalidArgument, "ncclCommShrink: rank %d excludes itself", comm->rank);
  for (int i = 0; res == ncclSuccess && i < n; i++)
    if (!out[i]) {
      if (i == comm->rank) me = m;
      members[m++] = i;
    }
  if (res == ncclSuccess) res = make_child(comm, members, m, me, config, newcomm, "ncclCommShrink");
  free(out), free(members);
  return res;
}
