/* remote.c - the CPU executor's path to ranks on other hosts: one connection per such rank (net
 * where it can connect the two, MSCCLPP_NET_TRANSPORT=on; else tcp),
 * made on the executor's first call (collective, peers in increasing order on every rank), used
 * by one block at a time (a lock per peer: a connection serves one thread at a time).
 *
 * What a mapped peer does with loads and stores becomes, here: writes of host memory into the
 * peer's registered sync or data region, reads answered by the peer's transport thread, and
 * 64-bit updates that land after every earlier write of the connection (signals and barrier
 * arrivals: the peer's acquire load of the word then sees the data written before it). A counter
 * has one writer (its sender), so a signal stores the sender's running count of it. */
#include <stdlib.h>

#include "core/comm.h"
#include "core/connection.h"
#include "exec/cpu/cpu.h"
#include "util/err.h"

struct exec_remote {
  struct mscclppConnection** conn; /* [rank]: NULL for mapped ranks and this one */
  pthread_mutex_t* lock;           /* [rank] */
  uint64_t* sent;                  /* [type-1][rank][ord]: signals sent so far */
};

static void remote_free(struct exec_remote* rem, int nranks, int abort) {
  for (int r = 0; rem->conn && rem->lock && r < nranks; r++) {
    if (rem->conn[r]) connection_free(rem->conn[r], abort);
    pthread_mutex_destroy(&rem->lock[r]);
  }
  free(rem->conn), free(rem->lock), free(rem->sent), free(rem);
}

void exec_remote_close(struct exec_cpu* st, int abort) {
  if (!st->rem) return;
  remote_free(st->rem, st->nranks, abort);
  st->rem = NULL;
}

mscclppResult_t exec_remote_open(struct exec_cpu* st) {
  int n = 0;
  for (int r = 0; r < st->nranks; r++) n += st->peer_sync[r] == NULL;
  if (n == 0) return mscclppSuccess;
  struct exec_remote* rem = calloc(1, sizeof(*rem));
  if (!rem) return MPP_ERR(mscclppSystemError, "executor: out of memory");
  rem->conn = calloc((size_t)st->nranks, sizeof(*rem->conn));
  rem->lock = calloc((size_t)st->nranks, sizeof(*rem->lock));
  rem->sent = calloc(2ull * (size_t)st->nranks * EXEC_MAX_ORD, sizeof(uint64_t));
  if (!rem->conn || !rem->lock || !rem->sent) {
    free(rem->conn), free(rem->lock), free(rem->sent), free(rem);
    return MPP_ERR(mscclppSystemError, "executor: out of memory");
  }
  for (int r = 0; r < st->nranks; r++) pthread_mutex_init(&rem->lock[r], NULL);
  st->rem = rem;
  for (int r = 0; r < st->nranks; r++) {
    if (st->peer_sync[r] != NULL) continue;
    mscclppTransport_t t = mscclppTransportTCP;
    int quiet = err_quiet(1); /* net's refusal only means tcp; both ranks decide alike */
    if (transport_resolve(&st->comm->tc, r, mscclppTransportNet, &t) != mscclppSuccess) t = mscclppTransportTCP;
    err_quiet(quiet);
    mscclppResult_t res = mscclppConnectionCreate(st->comm, r, EXEC_CONN_TAG, t, &rem->conn[r]);
    if (res != mscclppSuccess) {
      exec_remote_close(st, 1);
      return MPP_ERR(res, "executor: connecting to rank %d (another host) over %s: %s", r, transport_name(t), err_last());
    }
  }
  return mscclppSuccess;
}

/* The connection to owner, locked; NULL (error set) when owner is mapped here. */
static struct mscclppConnection* take(struct exec_cpu* st, int owner) {
  if (!st->rem || owner < 0 || owner >= st->nranks || !st->rem->conn[owner]) {
    (void)MPP_ERR(mscclppInvalidUsage, "executor: rank %d has no connection to rank %d", st->rank, owner);
    return NULL;
  }
  pthread_mutex_lock(&st->rem->lock[owner]);
  return st->rem->conn[owner];
}

static mscclppResult_t give(struct exec_cpu* st, int owner, mscclppResult_t res) {
  pthread_mutex_unlock(&st->rem->lock[owner]);
  return res;
}

mscclppResult_t exec_remote_write(struct exec_cpu* st, int owner, int sync, uint64_t off, const void* src, uint64_t n) {
  struct mscclppConnection* c = take(st, owner);
  if (!c) return mscclppInvalidUsage;
  mscclppRegisteredMemory* reg = sync ? &st->sync_reg : &st->data_reg;
  return give(st, owner, connection_write_host(c, reg->remote[owner], off, src, n));
}

mscclppResult_t exec_remote_read(struct exec_cpu* st, int owner, uint64_t off, void* dst, uint64_t n) {
  struct mscclppConnection* c = take(st, owner);
  if (!c) return mscclppInvalidUsage;
  return give(st, owner, connection_read_host(c, dst, st->data_reg.remote[owner], off, n));
}

/* Call with owner's lock held. */
static mscclppResult_t store_locked(struct exec_cpu* st, struct mscclppConnection* c, int owner, uint64_t off,
                                    uint64_t value) {
  uint64_t mirror;
  return mscclppConnectionUpdateAndSync(c, st->sync_reg.remote[owner], off, &mirror, value);
}

mscclppResult_t exec_remote_store(struct exec_cpu* st, int owner, uint64_t off, uint64_t value) {
  struct mscclppConnection* c = take(st, owner);
  if (!c) return mscclppInvalidUsage;
  return give(st, owner, store_locked(st, c, owner, off, value));
}

mscclppResult_t exec_remote_signal(struct exec_cpu* st, int owner, int type, int ord) {
  struct mscclppConnection* c = take(st, owner);
  if (!c) return mscclppInvalidUsage;
  /* The count and its store under one lock: two blocks signalling one channel store in order. */
  uint64_t v = ++st->rem->sent[((uint64_t)(type - 1) * (uint64_t)st->nranks + (uint64_t)owner) * EXEC_MAX_ORD + (uint64_t)ord];
  return give(st, owner, store_locked(st, c, owner, exec_sem_offset(st, type, st->rank, ord), v));
}

mscclppResult_t exec_remote_flush(struct exec_cpu* st, int owner) {
  struct mscclppConnection* c = take(st, owner);
  if (!c) return mscclppInvalidUsage;
  return give(st, owner, mscclppConnectionFlush(c, -1));
}

mscclppResult_t exec_remote_alive(struct exec_cpu* st, int owner) {
  if (!st->rem || owner < 0 || owner >= st->nranks || !st->rem->conn[owner]) return mscclppSuccess;
  pthread_mutex_lock(&st->rem->lock[owner]);
  return give(st, owner, connection_peer_alive(st->rem->conn[owner]));
}
