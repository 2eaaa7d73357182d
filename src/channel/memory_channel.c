/* memory_channel.c - making device-to-device semaphores and memory channels (the host side of
 * mscclpp/memory_channel.h). */
#include <mscclpp/memory_channel.h>

#include <string.h>

#include "channel/ext.h"
#include "core/comm.h"
#include "core/connection.h"
#include "core/handle_reg.h"
#include "util/err.h"
#include "util/log.h"

/* Why this rank and conn's peer cannot share a memory channel, or NULL when they can: both must
 * be GPU ranks (peer GPU memory) or both CPU ranks (shared host memory). */
static const char* kind_mismatch(struct mscclppComm* comm, int peer) {
  int me = comm->peers[comm->rank].kind, them = comm->peers[peer].kind;
  if (me == them) return NULL;
  return me == mscclppRankGpu ? "this rank is a GPU rank, the peer a CPU rank" : "this rank is a CPU rank, the peer a GPU rank";
}

mscclppResult_t mscclppMemoryDevSemaphoreCreate(mscclppComm_t comm, mscclppConnection_t conn, int channelId,
                                                mscclppMemoryDevSemaphore* sem) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(sem != NULL, "mscclppMemoryDevSemaphoreCreate: sem is NULL");
  MPP_CHECK(handle_check_owned(HANDLE_CONNECTION, conn, comm, __func__));
  struct chan_ext* x = NULL;
  MPP_CHECK(chan_ext_get(comm, &x));
  struct token_slot mine;
  memset(&mine, 0, sizeof(mine));
  const char* why = kind_mismatch(comm, conn->t.peer);
  mscclppResult_t local = mscclppSuccess;
  if (why != NULL) {
    local = MPP_ERR(mscclppInvalidUsage, "memory-channel semaphore with rank %d: %s; memory channels need two GPU ranks "
                    "(p2p) or two CPU ranks of one host (shm)", conn->t.peer, why);
  } else {
    pthread_mutex_lock(&x->lock);
    local = tokens_alloc(x, &mine);
    pthread_mutex_unlock(&x->lock);
  }
  struct token_peer theirs;
  MPP_CHECK(tokens_exchange(x, conn, TOKEN_MEMORY, local, &mine, &theirs));
  if (theirs.ptr == NULL)
    return MPP_ERR(mscclppInvalidUsage,
                   "memory-channel semaphore with rank %d (tag %d): the peer's token memory is not mapped here (memory "
                   "channels need ranks of one host: p2p between GPU ranks, shm between CPU ranks)",
                   conn->t.peer, conn->t.tag);
  memset(sem, 0, sizeof(*sem));
  sem->inbound = mine.token;
  sem->expected = mine.expected;
  sem->remoteInbound = theirs.ptr;
  ext_wait_info(x, conn->t.peer, channelId, &sem->wait);
  LOG_DEBUG_(LOG_SUB_PROXY, "memory-channel semaphore %d with rank %d: token %p, peer's %p", channelId, conn->t.peer,
             (void*)mine.token, (void*)theirs.ptr);
  return mscclppSuccess;
}

mscclppResult_t mscclppMemoryChannelMake(const mscclppMemoryDevSemaphore* sem, mscclppRegMem_t remote,
                                         mscclppRegMem_t local, void* packetBuffer, mscclppMemoryChannel* chan) {
  err_clear();
  MPP_CHECK_ARG(sem != NULL && chan != NULL, "mscclppMemoryChannelMake: sem or chan is NULL");
  MPP_CHECK_ARG(sem->inbound != NULL && sem->remoteInbound != NULL, "mscclppMemoryChannelMake: sem was not made");
  void* rptr = NULL;
  void* lptr = NULL;
  int owner = -1;
  if (remote != NULL) {
    MPP_CHECK(mscclppRegMemInfo(remote, &rptr, NULL, &owner));
    if (owner != sem->wait.peer)
      return MPP_ERR(mscclppInvalidUsage, "mscclppMemoryChannelMake: remote memory is rank %d's, the semaphore's peer is rank %d",
                     owner, sem->wait.peer);
    if (rptr == NULL)
      return MPP_ERR(mscclppInvalidUsage, "mscclppMemoryChannelMake: rank %d's remote memory is not mapped here", owner);
  }
  if (local != NULL) {
    MPP_CHECK(mscclppRegMemInfo(local, &lptr, NULL, &owner));
    if (owner != sem->wait.rank)
      return MPP_ERR(mscclppInvalidUsage, "mscclppMemoryChannelMake: local memory is rank %d's, not this rank's (%d)",
                     owner, sem->wait.rank);
  }
  memset(chan, 0, sizeof(*chan));
  chan->sem = *sem;
  chan->remote = rptr;
  chan->local = lptr;
  chan->packetBuffer = packetBuffer;
  return mscclppSuccess;
}

mscclppResult_t mscclppMemoryChannelCreate(mscclppComm_t comm, mscclppConnection_t conn, mscclppRegMem_t remote,
                                           mscclppRegMem_t local, void* packetBuffer, int channelId,
                                           mscclppMemoryChannel* chan) {
  mscclppMemoryDevSemaphore sem;
  MPP_CHECK(mscclppMemoryDevSemaphoreCreate(comm, conn, channelId, &sem));
  return mscclppMemoryChannelMake(&sem, remote, local, packetBuffer, chan);
}
