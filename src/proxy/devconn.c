/* devconn.c - the seed API's connections (mscclpp/devconn.h) on top of connections, registered
 * memory and port channels of the communicator's own proxy service. The state lives in the
 * channel state's seed slot and is released with the communicator's channels. */
#include <mscclpp/devconn.h>

#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/connection.h"
#include "proxy/proxy.h"
#include "util/err.h"
#include "util/log.h"

#define SEED_MSG_MAGIC 0x44455344u /* "DSED" */

struct seed_conn {
  int peer, tag;
  void* buf;
  uint64_t size;
  mscclppTransport_t transport;
  int ready;
  mscclppConnection_t conn;
  mscclppRegMem_t local, remote;
};

struct seed_state {
  struct seed_conn* conns;
  mscclppDevConn* dev; /* cap entries; the first n_ready are set up */
  int n, cap, n_ready;
  mscclppProxyService_t proxy;
};

/* The buffer description each side of a seed connection sends. */
struct seed_msg {
  uint32_t magic;
  int32_t status;
  int32_t rank, tag;
  uint64_t blob_len;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

/* The slot's finalizer: stops the proxy, releases the connections and registrations. */
static void seed_fini(struct mscclppComm* comm, void* state, int abort) {
  (void)comm;
  (void)abort;
  struct seed_state* s = state;
  if (s->proxy) mscclppProxyServiceDestroy(s->proxy);
  for (int i = 0; i < s->n; i++) {
    struct seed_conn* c = &s->conns[i];
    if (c->remote) mscclppRegMemRelease(c->remote);
    if (c->local) mscclppRegMemRelease(c->local);
    if (c->conn) mscclppConnectionDestroy(c->conn);
  }
  free(s->conns);
  free(s->dev);
  free(s);
}

static mscclppResult_t seed_make(struct mscclppComm* comm, void** state) {
  (void)comm;
  *state = calloc(1, sizeof(struct seed_state));
  return *state ? mscclppSuccess : MPP_ERR(mscclppSystemError, "seed API: out of host memory");
}

/* The communicator's seed state (its COMM_EXT_PROXY slot); made when create != 0, else NULL when
 * there is none. */
static mscclppResult_t seed_get(struct mscclppComm* comm, int create, struct seed_state** out) {
  *out = comm_ext_peek(comm, COMM_EXT_PROXY);
  if (*out || !create) return mscclppSuccess;
  void* state = NULL;
  MPP_CHECK(comm_ext_get(comm, COMM_EXT_PROXY, seed_make, seed_fini, &state));
  *out = state;
  return mscclppSuccess;
}

mscclppResult_t mscclppConnect(mscclppComm_t comm, int remoteRank, int tag, void* localBuff, uint64_t buffSize,
                               mscclppTransport_t transportType, const char* ibDev) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(remoteRank >= 0 && remoteRank < comm->nranks && remoteRank != comm->rank,
                "mscclppConnect: remote rank %d is not another rank of [0, %d)", remoteRank, comm->nranks);
  MPP_CHECK_ARG(tag >= 0 && tag <= 0xffffff, "mscclppConnect: tag %d is outside [0, 2^24)", tag);
  MPP_CHECK_ARG(localBuff != NULL && buffSize > 0, "mscclppConnect: localBuff is NULL or buffSize is 0");
  if (transportType == mscclppTransportIB)
    return MPP_ERR(mscclppInvalidUsage, "mscclppConnect: the InfiniBand transport is not built (device %s)",
                   ibDev ? ibDev : "(none)");
  MPP_CHECK_ARG(transport_valid((int)transportType),
                "mscclppConnect: unknown transport %d", (int)transportType);
  struct seed_state* s = NULL;
  MPP_CHECK(seed_get(comm, 1, &s));
  for (int i = 0; i < s->n; i++)
    if (s->conns[i].peer == remoteRank && s->conns[i].tag == tag)
      return MPP_ERR(mscclppInvalidUsage, "mscclppConnect: a connection to rank %d with tag %d exists already", remoteRank, tag);
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 8;
    struct seed_conn* c = realloc(s->conns, (size_t)cap * sizeof(*c));
    if (c == NULL) return MPP_ERR(mscclppSystemError, "mscclppConnect: out of host memory");
    s->conns = c;
    s->cap = cap;
  }
  s->conns[s->n++] = (struct seed_conn){.peer = remoteRank, .tag = tag, .buf = localBuff, .size = buffSize,
                                        .transport = transportType};
  return mscclppSuccess;
}

/* Swaps buffer descriptions with c's peer (lower rank first) and imports the peer's. */
static mscclppResult_t swap_buffers(struct mscclppComm* comm, struct seed_conn* c, mscclppResult_t local) {
  struct seed_msg out, in;
  memset(&out, 0, sizeof(out));
  out.magic = SEED_MSG_MAGIC;
  out.rank = comm->rank;
  out.tag = c->tag;
  size_t len = sizeof(out.blob);
  out.status = local != mscclppSuccess ? (int32_t)local : (int32_t)mscclppRegMemSerialize(c->local, out.blob, &len);
  out.blob_len = len;
  int btag = boot_tag(BOOT_TAG_DEVCONN, c->tag);
  if (comm->rank < c->peer) {
    MPP_CHECK(bootstrap_send(comm->boot, c->peer, btag, &out, sizeof(out)));
    MPP_CHECK(bootstrap_recv(comm->boot, c->peer, btag, &in, sizeof(in)));
  } else {
    MPP_CHECK(bootstrap_recv(comm->boot, c->peer, btag, &in, sizeof(in)));
    MPP_CHECK(bootstrap_send(comm->boot, c->peer, btag, &out, sizeof(out)));
  }
  if (out.status != mscclppSuccess) return (mscclppResult_t)out.status;
  if (in.magic != SEED_MSG_MAGIC || in.rank != c->peer || in.tag != c->tag || in.blob_len > MSCCLPP_REGMEM_BLOB_BYTES)
    return MPP_ERR(mscclppRemoteError, "seed connection to rank %d (tag %d): malformed buffer description", c->peer, c->tag);
  if (in.status != mscclppSuccess)
    return MPP_ERR(mscclppRemoteError, "seed connection to rank %d (tag %d): the peer failed to register its buffer",
                   c->peer, c->tag);
  return mscclppRegMemDeserialize(comm, in.blob, (size_t)in.blob_len, &c->remote);
}

/* Connection, registration, exchange, semaphore and port of one declared connection. */
static mscclppResult_t setup_one(struct mscclppComm* comm, struct seed_state* s, int i) {
  struct seed_conn* c = &s->conns[i];
  MPP_CHECK(mscclppConnectionCreate(comm, c->peer, c->tag, c->transport, &c->conn));
  mscclppResult_t local = mscclppRegisterMemory(comm, c->buf, c->size, &c->local);
  MPP_CHECK(swap_buffers(comm, c, local));
  int sem = -1;
  MPP_CHECK(mscclppProxyServiceAddSemaphore(s->proxy, c->conn, &sem));
  mscclppDevConn* d = &s->dev[i];
  memset(d, 0, sizeof(*d));
  MPP_CHECK(mscclppPortChannelCreate(s->proxy, sem, c->remote, c->local, i, &d->port));
  d->remoteRank = c->peer;
  d->tag = c->tag;
  d->localBuff = c->buf;
  d->buffSize = c->size;
  MPP_CHECK(mscclppRegMemInfo(c->remote, &d->remoteBuff, NULL, NULL));
  c->ready = 1;
  return mscclppSuccess;
}

mscclppResult_t mscclppConnectionSetup(mscclppComm_t comm) {
  err_clear();
  COMM_CHECK(comm);
  struct seed_state* s = NULL;
  MPP_CHECK(seed_get(comm, 0, &s));
  if (s == NULL || s->n == 0) return mscclppSuccess;
  if (s->proxy == NULL) MPP_CHECK(mscclppProxyServiceCreate(comm, 0, &s->proxy));
  mscclppDevConn* dev = realloc(s->dev, (size_t)s->cap * sizeof(*dev));
  if (dev == NULL) return MPP_ERR(mscclppSystemError, "mscclppConnectionSetup: out of host memory");
  s->dev = dev;
  /* In declaration order; a connection whose setup failed is left as far as it got (released with
   * the communicator's channels) and later ones are not attempted. */
  for (int i = s->n_ready; i < s->n; i++) {
    MPP_CHECK(setup_one(comm, s, i));
    s->n_ready = i + 1;
  }
  LOG_INFO_(LOG_SUB_PROXY, "rank %d: %d seed connections set up", comm->rank, s->n_ready);
  return mscclppSuccess;
}

mscclppResult_t mscclppGetAllDeviceConnections(mscclppComm_t comm, mscclppDevConn_t** devConns, int* nConns) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(devConns != NULL && nConns != NULL, "mscclppGetAllDeviceConnections: NULL argument");
  struct seed_state* s = NULL;
  MPP_CHECK(seed_get(comm, 0, &s));
  *devConns = s ? s->dev : NULL;
  *nConns = s ? s->n_ready : 0;
  return mscclppSuccess;
}

mscclppResult_t mscclppGetDeviceConnection(mscclppComm_t comm, int remoteRank, int tag, mscclppDevConn_t** devConn) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(devConn != NULL, "mscclppGetDeviceConnection: devConn is NULL");
  struct seed_state* s = NULL;
  MPP_CHECK(seed_get(comm, 0, &s));
  for (int i = 0; s != NULL && i < s->n_ready; i++)
    if (s->dev[i].remoteRank == remoteRank && s->dev[i].tag == tag) {
      *devConn = &s->dev[i];
      return mscclppSuccess;
    }
  return MPP_ERR(mscclppInvalidArgument, "mscclppGetDeviceConnection: no connection to rank %d with tag %d is set up",
                 remoteRank, tag);
}

/* The communicator's seed proxy, or InvalidUsage naming the caller. */
static mscclppResult_t seed_proxy(struct mscclppComm* comm, const char* who, mscclppProxyService_t* out) {
  struct seed_state* s = NULL;
  MPP_CHECK(seed_get(comm, 0, &s));
  if (s == NULL || s->proxy == NULL)
    return MPP_ERR(mscclppInvalidUsage, "%s: no connections were set up (mscclppConnect, mscclppConnectionSetup)", who);
  *out = s->proxy;
  return mscclppSuccess;
}

mscclppResult_t mscclppProxyLaunch(mscclppComm_t comm) {
  err_clear();
  COMM_CHECK(comm);
  mscclppProxyService_t p = NULL;
  MPP_CHECK(seed_proxy(comm, "mscclppProxyLaunch", &p));
  return mscclppProxyServiceStart(p);
}

mscclppResult_t mscclppProxyStop(mscclppComm_t comm) {
  err_clear();
  COMM_CHECK(comm);
  mscclppProxyService_t p = NULL;
  MPP_CHECK(seed_proxy(comm, "mscclppProxyStop", &p));
  return mscclppProxyServiceStop(p);
}
