/* transports.c - what the transports keep per communicator (the fd service, the region table and
 * the lists of open registrations, connections and semaphores), transport lookup and the choice
 * Auto makes. */
#include <stdlib.h>

#include "core/comm.h"
#include "core/connection.h"
#include "transport/fdpass.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/log.h"

const struct transport_ops* transport_get(mscclppTransport_t t) {
  switch (t) {
    case mscclppTransportP2P: return &cudaipc_transport;
    case mscclppTransportSHM: return &shm_transport;
    case mscclppTransportTCP: return &tcp_transport;
    default: return NULL;
  }
}

const char* transport_name(mscclppTransport_t t) {
  switch (t) {
    case mscclppTransportP2P: return "p2p";
    case mscclppTransportSHM: return "shm";
    case mscclppTransportIB: return "ib";
    case mscclppTransportTCP: return "tcp";
    case mscclppTransportAuto: return "auto";
    default: return "unknown";
  }
}

#if MSCCLPP_HAVE_CUDA
static const int have_cuda = 1;
#else
static const int have_cuda = 0;
#endif

int same_host(const struct mscclppComm* comm, int r) {
  return comm->peers[r].host_hash == comm->peers[comm->rank].host_hash;
}

/* Why the forced transport t cannot connect this rank with peer, or NULL when it can. */
static const char* unusable_reason(struct mscclppComm* comm, int peer, mscclppTransport_t t) {
  switch (t) {
    case mscclppTransportTCP: return NULL;
    case mscclppTransportSHM: return same_host(comm, peer) ? NULL : "the two ranks are on different hosts";
    case mscclppTransportP2P:
#if !MSCCLPP_HAVE_CUDA
      return "the library was built without CUDA";
#else
      if (!same_host(comm, peer)) return "the two ranks are on different hosts";
      return comm->peers[comm->rank].kind == mscclppRankGpu && comm->peers[peer].kind == mscclppRankGpu
                 ? NULL
                 : "both ranks must be GPU ranks";
#endif
    case mscclppTransportIB: return "the InfiniBand transport is not built yet";
    default: return "unknown transport";
  }
}

mscclppResult_t transport_resolve(struct mscclppComm* comm, int peer, mscclppTransport_t want, mscclppTransport_t* out) {
  if (want == mscclppTransportAuto) {
    const struct peer_info* me = &comm->peers[comm->rank];
    const struct peer_info* them = &comm->peers[peer];
    if (!same_host(comm, peer))
      want = mscclppTransportTCP;
    else if (have_cuda && me->kind == mscclppRankGpu && them->kind == mscclppRankGpu)
      want = mscclppTransportP2P;
    else
      want = mscclppTransportSHM;
  }
  const char* why = unusable_reason(comm, peer, want);
  if (why != NULL)
    return MPP_ERR(mscclppInvalidUsage, "transport %s cannot connect rank %d with rank %d: %s", transport_name(want),
                   comm->rank, peer, why);
  *out = want;
  return mscclppSuccess;
}

void tstate_track(struct mscclppComm* comm, struct list_node* list, struct list_node* node) {
  pthread_mutex_lock(&comm->tstate->lock);
  list_push(list, node);
  pthread_mutex_unlock(&comm->tstate->lock);
}

void tstate_untrack(struct mscclppComm* comm, struct list_node* node) {
  pthread_mutex_lock(&comm->tstate->lock);
  list_unlink(node);
  pthread_mutex_unlock(&comm->tstate->lock);
}

mscclppResult_t transports_init(struct mscclppComm* comm) {
  struct transport_state* s = calloc(1, sizeof(*s));
  if (s == NULL) return MPP_ERR(mscclppSystemError, "transports_init: out of host memory");
  pthread_mutex_init(&s->lock, NULL);
  list_init(&s->mems);
  list_init(&s->conns);
  list_init(&s->sems);
  region_table_init(&s->regions);
  mscclppResult_t res = fd_service_start(comm->comm_id, comm->rank, comm->nranks, &s->fds);
  if (res != mscclppSuccess) {
    region_table_fini(&s->regions);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return res;
  }
  comm->tstate = s;
  return mscclppSuccess;
}

/* Pops the first node of list (NULL when empty) under the state's lock. */
static struct list_node* pop_first(struct transport_state* s, struct list_node* list) {
  pthread_mutex_lock(&s->lock);
  struct list_node* n = list->next == list ? NULL : list->next;
  if (n != NULL) list_unlink(n);
  pthread_mutex_unlock(&s->lock);
  return n;
}

/* Frees what the user left open: semaphores first (they hold memory and use connections), then
 * connections (joining their threads), then registrations; finally the fd service. */
void transports_fini(struct mscclppComm* comm, int abort) {
  struct transport_state* s = comm->tstate;
  if (s == NULL) return;
  struct list_node* n;
  int left = 0;
  while ((n = pop_first(s, &s->sems)) != NULL) {
    semaphore_free((struct mscclppHostSemaphore*)(void*)n);
    left++;
  }
  while ((n = pop_first(s, &s->conns)) != NULL) {
    connection_free((struct mscclppConnection*)(void*)n, abort);
    left++;
  }
  while ((n = pop_first(s, &s->mems)) != NULL) {
    regmem_free((struct mscclppRegMem*)(void*)n);
    left++;
  }
  if (left > 0)
    LOG_INFO_(LOG_SUB_TRANSPORT, "communicator teardown released %d registrations, connections or semaphores left open", left);
  fd_service_stop(s->fds);
  region_table_fini(&s->regions);
  pthread_mutex_destroy(&s->lock);
  free(s);
  comm->tstate = NULL;
}
