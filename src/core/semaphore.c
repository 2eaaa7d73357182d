/* semaphore.c - host semaphores. Each side owns a 64-bit monotonic token in its own shared host
 * memory (mscclppMemAlloc(host): mappable by a peer of this host, and a tcp region for any peer).
 * The peer signals by storing ++outbound into our token through the connection's
 * update_and_sync, which orders the store after the connection's earlier writes; we wait until
 * the token reaches ++expected, reading it with acquire order, so the data written before the
 * signal is visible once the wait returns. */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/connection.h"
#include "core/handle_reg.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

#define MAX_WAIT_MS (1ll << 40) /* about 35 years */

struct mscclppHostSemaphore {
  struct list_node link; /* in the communicator's list of open semaphores (first member) */
  struct mscclppConnection* conn;
  _Atomic uint64_t* token;       /* ours: the peer advances it */
  struct mscclppRegMem* local;   /* token's registration */
  struct mscclppRegMem* remote;  /* the peer's token, imported */
  uint64_t outbound;             /* signals sent */
  uint64_t expected;             /* signals consumed */
};

/* Frees what exists of sem (not tracked). */
static void sem_destroy(struct mscclppHostSemaphore* sem) {
  regmem_free(sem->remote);
  regmem_free(sem->local);
  if (sem->token != NULL) mem_free((void*)sem->token);
  free(sem);
}

void semaphore_free(struct mscclppHostSemaphore* sem) {
  if (sem == NULL) return;
  handle_remove(HANDLE_HOST_SEMAPHORE, sem);
  comm_objects_untrack(sem->conn->comm, &sem->link);
  sem->conn->nsems--;
  sem_destroy(sem);
}

/* Swaps size bytes with the connection's peer under the semaphores' bootstrap tag. */
static mscclppResult_t swap(struct mscclppConnection* conn, const void* mine, void* theirs, size_t size) {
  return bootstrap_swap(conn->comm->boot, conn->t.peer, boot_tag(BOOT_TAG_SEM, conn->t.tag), mine, theirs, size);
}

/* Allocates and registers this side's token. */
static mscclppResult_t make_token(struct mscclppConnection* conn, struct mscclppHostSemaphore* sem) {
  void* p = NULL;
  MPP_CHECK(mem_alloc(&p, sizeof(uint64_t), mscclppMemHost));
  sem->token = p;
  return regmem_register(conn->comm, p, sizeof(uint64_t), &sem->local);
}


/* Imports the peer's token blob; a blob of zeros means the peer could not make its token. */
static mscclppResult_t import_token(struct mscclppConnection* conn, struct mscclppHostSemaphore* s, const uint8_t* blob) {
  static const uint8_t zero[4];
  if (memcmp(blob, zero, sizeof(zero)) == 0)
    return MPP_ERR(mscclppRemoteError, "host semaphore with rank %d (tag %d): the peer failed to create its side (see its log)",
                   conn->t.peer, conn->t.tag);
  /* With the transports the connection's row names: its own, and for cuda-ipc also shm, which maps
   * the host-memory token for the update to store into. */
  MPP_CHECK(regmem_import(conn->comm, blob, regblob_bytes(), conn->ops->token_import, &s->remote));
  return connection_check_dst(conn, s->remote, 0, sizeof(uint64_t));
}

/* Two exchanges, each made by both sides whatever happened before it (so that no message is left
 * behind for a later semaphore of the connection): the token blobs (zeros from a side that could
 * not make its token), then whether the import worked. Both sides return only once both imported,
 * so the peer cannot release its token while this side still fetches it, and a failure on either
 * side fails both. */
static mscclppResult_t sem_handshake(struct mscclppConnection* conn, struct mscclppHostSemaphore* s) {
  uint8_t mine[MSCCLPP_REGMEM_BLOB_BYTES] = {0}, theirs[MSCCLPP_REGMEM_BLOB_BYTES];
  mscclppResult_t res = make_token(conn, s);
  if (res == mscclppSuccess) regblob_encode(&s->local->t.d, mine);
  MPP_CHECK(swap(conn, mine, theirs, sizeof(mine)));
  if (res == mscclppSuccess) res = import_token(conn, s, theirs);
  int32_t ok = res == mscclppSuccess, peer_ok = 0;
  MPP_CHECK(swap(conn, &ok, &peer_ok, sizeof(ok)));
  if (res != mscclppSuccess) return res;
  if (!peer_ok)
    return MPP_ERR(mscclppRemoteError, "host semaphore with rank %d (tag %d): the peer failed to import this rank's token (see its log)",
                   conn->t.peer, conn->t.tag);
  return mscclppSuccess;
}

mscclppResult_t mscclppHostSemaphoreCreate(mscclppComm_t comm, mscclppConnection_t conn, mscclppHostSemaphore_t* sem) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(sem != NULL, "mscclppHostSemaphoreCreate: sem is NULL");
  MPP_CHECK(handle_check_owned(HANDLE_CONNECTION, conn, comm, __func__));
  struct mscclppHostSemaphore* s = calloc(1, sizeof(*s));
  if (s == NULL) return MPP_ERR(mscclppSystemError, "mscclppHostSemaphoreCreate: out of host memory");
  list_init(&s->link);
  s->conn = conn;
  mscclppResult_t res = sem_handshake(conn, s);
  if (res == mscclppSuccess) res = handle_add(HANDLE_HOST_SEMAPHORE, s, comm);
  if (res != mscclppSuccess) {
    sem_destroy(s);
    return res;
  }
  conn->nsems++;
  comm_objects_track(comm, COMM_OBJ_SEMS, &s->link);
  *sem = s;
  return mscclppSuccess;
}

mscclppResult_t mscclppHostSemaphoreSignal(mscclppHostSemaphore_t sem) {
  err_clear();
  HANDLE_CHECK(HANDLE_HOST_SEMAPHORE, sem);
  struct mscclppConnection* c = sem->conn;
  mscclppResult_t res = connection_explained(c, c->ops->update_and_sync(&c->t, &sem->remote->t, 0, sem->outbound + 1));
  if (res == mscclppSuccess) sem->outbound++;
  return res;
}

/* Acquire: pairs with the release store of whoever advanced the token (the peer through shm, our
 * tcp receiver, or the p2p update after its stream drained), so the data written before the
 * signal is visible to the caller once this returns 1. */
static int try_consume(struct mscclppHostSemaphore* sem) {
  if (atomic_load_explicit(sem->token, memory_order_acquire) < sem->expected + 1) return 0;
  sem->expected++;
  return 1;
}

/* Spins briefly, then yields, then sleeps: a waiter on a busy (or small) machine leaves the CPU to
 * the ranks it waits for. */
static void backoff(uint64_t waited_ns, unsigned spins) {
  if (spins < 256) return;
  if (waited_ns < 2000000) sched_yield();
  else usleep(waited_ns < 100000000 ? 20 : 200);
}

/* The peer is gone: the wait still succeeds when its last signal arrived before it left. */
static mscclppResult_t gone(struct mscclppHostSemaphore* sem, mscclppResult_t why) {
  if (try_consume(sem)) return mscclppSuccess;
  char text[512];
  snprintf(text, sizeof(text), "%s", err_last());
  const struct mscclppConnection* c = sem->conn;
  return MPP_ERR(why, "host semaphore wait for step %llu from rank %d (%s connection, tag %d) failed: %s",
                 (unsigned long long)sem->expected + 1, c->t.peer, transport_name(c->transport), c->t.tag, text);
}

mscclppResult_t mscclppHostSemaphoreWait(mscclppHostSemaphore_t sem, int64_t timeoutMs) {
  err_clear();
  HANDLE_CHECK(HANDLE_HOST_SEMAPHORE, sem);
  if (try_consume(sem)) return mscclppSuccess;
  int64_t timeout = timeoutMs < 0 ? param_int(PARAM_SEMAPHORE_TIMEOUT) : timeoutMs;
  if (timeout > MAX_WAIT_MS) timeout = MAX_WAIT_MS; /* keeps the deadline arithmetic in range */
  struct mscclppConnection* c = sem->conn;
  uint64_t start = time_now_ns(), deadline = start + (uint64_t)timeout * 1000000ull;
  uint64_t next_check = start + 20000000ull;
  for (unsigned spins = 0;; spins++) {
    if (try_consume(sem)) return mscclppSuccess;
    uint64_t now = time_now_ns();
    if (now >= next_check) { /* every 20 ms: is the peer still there, is this rank aborting? */
      next_check = now + 20000000ull;
      if (comm_aborting(c->comm))
        return MPP_ERR(mscclppAborted, "host semaphore wait for step %llu from rank %d: the communicator is being aborted",
                       (unsigned long long)sem->expected + 1, c->t.peer);
      mscclppResult_t alive = connection_peer_alive(c);
      if (alive != mscclppSuccess) return gone(sem, alive);
    }
    if (now >= deadline)
      return MPP_ERR(mscclppTimeout,
                     "host semaphore wait: rank %d did not signal step %llu within %lld ms (token is at %llu; %s "
                     "connection, tag %d)",
                     c->t.peer, (unsigned long long)sem->expected + 1, (long long)timeout,
                     (unsigned long long)atomic_load(sem->token), transport_name(c->transport), c->t.tag);
    backoff(now - start, spins);
  }
}

mscclppResult_t mscclppHostSemaphorePoll(mscclppHostSemaphore_t sem, int* ready) {
  err_clear();
  MPP_CHECK_ARG(ready != NULL, "mscclppHostSemaphorePoll: ready is NULL");
  HANDLE_CHECK(HANDLE_HOST_SEMAPHORE, sem);
  *ready = try_consume(sem);
  return mscclppSuccess;
}

mscclppResult_t mscclppHostSemaphoreDestroy(mscclppHostSemaphore_t sem) {
  err_clear();
  MPP_CHECK(handle_retire(HANDLE_HOST_SEMAPHORE, sem, __func__)); /* refused while another thread's call uses it */
  semaphore_free(sem);
  return mscclppSuccess;
}
