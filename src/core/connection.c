/* connection.c - the public connection API: the pairwise handshake that makes both ranks agree on
 * the transport, argument checks, and dispatch to the transport's ops. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/connection.h"
#include "core/handle_reg.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#define CONN_MAGIC 0x4e4f434du /* "MCON" */
#define EXPLAIN_GRACE_MS 500     /* how long a broken connection waits to learn which rank died */

/* What each side of a new connection tells the other. */
struct conn_hello {
  uint32_t magic;
  int32_t rank;
  uint64_t comm_id;
  int32_t tag;
  int32_t transport; /* resolved transport, or -1 when this side could not resolve it */
};

/* Resolves the transport and checks that the peer resolved the same, with the same tag. The
 * hello is sent even when this side cannot resolve, so that the peer fails at once too. */
static mscclppResult_t agree(struct mscclppComm* comm, int peer, int tag, mscclppTransport_t want, mscclppTransport_t* out) {
  mscclppTransport_t t = mscclppTransportAuto;
  mscclppResult_t local = transport_resolve(&comm->tc, peer, want, &t);
  struct conn_hello mine = {.magic = CONN_MAGIC, .rank = comm->rank, .comm_id = comm->comm_id, .tag = tag,
                            .transport = local == mscclppSuccess ? (int32_t)t : -1};
  struct conn_hello theirs;
  /* Every connection of a pair swaps its hello under the same bootstrap tag (not one derived from
   * the connection's tag), so that the two sides calling with different tags, or creating a pair's
   * connections in different orders, is an error on both at once instead of two waits that time
   * out. */
  MPP_CHECK(bootstrap_swap(comm->boot, peer, boot_tag(BOOT_TAG_CONN, 0), &mine, &theirs, sizeof(mine)));
  if (local != mscclppSuccess) return local;
  if (theirs.magic != CONN_MAGIC || theirs.rank != peer || theirs.comm_id != comm->comm_id)
    return MPP_ERR(mscclppRemoteError, "connection handshake with rank %d: malformed reply", peer);
  if (theirs.tag != tag)
    return MPP_ERR(mscclppInvalidUsage, "connection to rank %d: this rank uses tag %d, the peer tag %d", peer, tag, theirs.tag);
  if (theirs.transport < 0)
    return MPP_ERR(mscclppInvalidUsage, "connection to rank %d (tag %d): the peer cannot use transport %s (see its log)",
                   peer, tag, transport_name(t));
  if (theirs.transport != (int32_t)t)
    return MPP_ERR(mscclppInvalidUsage, "connection to rank %d (tag %d): this rank resolved transport %s, the peer %s", peer,
                   tag, transport_name(t), transport_name((mscclppTransport_t)theirs.transport));
  *out = t;
  return mscclppSuccess;
}

mscclppResult_t mscclppConnectionCreate(mscclppComm_t comm, int peer, int tag, mscclppTransport_t transport,
                                        mscclppConnection_t* conn) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(conn != NULL, "mscclppConnectionCreate: conn is NULL");
  MPP_CHECK_ARG(peer >= 0 && peer < comm->nranks && peer != comm->rank,
                "mscclppConnectionCreate: peer %d is not another rank of [0, %d) (this rank is %d)", peer, comm->nranks,
                comm->rank);
  MPP_CHECK_ARG(transport_valid((int)transport),
                "mscclppConnectionCreate: unknown transport %d", (int)transport);
  mscclppTransport_t t = mscclppTransportAuto;
  MPP_CHECK(agree(comm, peer, tag, transport, &t));
  struct mscclppConnection* c = calloc(1, sizeof(*c));
  if (c == NULL) return MPP_ERR(mscclppSystemError, "mscclppConnectionCreate: out of host memory");
  *c = (struct mscclppConnection){.comm = comm, .ops = transport_get(t), .transport = t,
                                   .t = {.tc = &comm->tc, .peer = peer, .tag = tag}};
  list_init(&c->link);
  mscclppResult_t res = c->ops->connect(&c->t);
  if (res == mscclppSuccess) {
    res = handle_add(HANDLE_CONNECTION, c, comm);
    if (res != mscclppSuccess) c->ops->close(&c->t, 1);
  }
  if (res != mscclppSuccess) {
    free(c);
    return res;
  }
  comm_objects_track(comm, COMM_OBJ_CONNS, &c->link);
  LOG_INFO_(LOG_SUB_TRANSPORT, "connected rank %d with rank %d (tag %d) over %s", comm->rank, peer, tag, c->ops->name);
  *conn = c;
  return mscclppSuccess;
}

mscclppResult_t mscclppConnectionTransport(mscclppConnection_t conn, mscclppTransport_t* transport) {
  err_clear();
  MPP_CHECK_ARG(transport != NULL, "mscclppConnectionTransport: transport is NULL");
  HANDLE_CHECK(HANDLE_CONNECTION, conn);
  *transport = conn->transport;
  return mscclppSuccess;
}

mscclppResult_t mscclppConnectionPeer(mscclppConnection_t conn, int* peer) {
  err_clear();
  MPP_CHECK_ARG(peer != NULL, "mscclppConnectionPeer: peer is NULL");
  HANDLE_CHECK(HANDLE_CONNECTION, conn);
  *peer = conn->t.peer;
  return mscclppSuccess;
}

/* Why dst, though a valid buffer of the peer, cannot be reached through conn here; NULL if it can:
 * a transport that maps memory needs dst mapped here, the others need dst to offer them. */
static const char* unreachable(const struct mscclppConnection* conn, const struct mscclppRegMem* dst) {
  int reached = conn->ops->maps_memory ? dst->t.ptr != NULL : (dst->t.d.transports & TRANSPORT_BIT(conn->transport)) != 0;
  return reached ? NULL : conn->ops->unreachable_why;
}

mscclppResult_t connection_check_dst(struct mscclppConnection* conn, struct mscclppRegMem* dst, uint64_t dst_off,
                                     uint64_t size) {
  const char* tn = transport_name(conn->transport);
  if (dst == NULL) return MPP_ERR(mscclppInvalidArgument, "%s connection to rank %d: destination is NULL", tn, conn->t.peer);
  if (dst->comm != conn->comm)
    return MPP_ERR(mscclppInvalidArgument, "%s connection to rank %d: destination belongs to another communicator", tn,
                   conn->t.peer);
  if (dst->t.local || dst->t.d.owner != conn->t.peer)
    return MPP_ERR(mscclppInvalidUsage, "%s connection to rank %d: destination is rank %d's memory, not the peer's", tn,
                   conn->t.peer, dst->t.d.owner);
  if (dst_off > dst->t.d.size || size > dst->t.d.size - dst_off)
    return MPP_ERR(mscclppInvalidArgument, "%s connection to rank %d: %llu bytes at offset %llu exceed its %llu-byte buffer",
                   tn, conn->t.peer, (unsigned long long)size, (unsigned long long)dst_off,
                   (unsigned long long)dst->t.d.size);
  const char* why = unreachable(conn, dst);
  if (why != NULL)
    return MPP_ERR(mscclppInvalidUsage, "%s connection to rank %d: cannot reach its buffer: %s", tn, conn->t.peer, why);
  return mscclppSuccess;
}

static mscclppResult_t check_src(struct mscclppConnection* conn, struct mscclppRegMem* src, uint64_t src_off, uint64_t size) {
  if (src == NULL || src->comm != conn->comm || !src->t.local)
    return MPP_ERR(mscclppInvalidUsage, "%s connection to rank %d: source must be memory this rank registered in this communicator",
                   transport_name(conn->transport), conn->t.peer);
  if (src_off > src->t.d.size || size > src->t.d.size - src_off)
    return MPP_ERR(mscclppInvalidArgument, "%s connection to rank %d: %llu source bytes at offset %llu exceed the %llu-byte buffer",
                   transport_name(conn->transport), conn->t.peer, (unsigned long long)size, (unsigned long long)src_off,
                   (unsigned long long)src->t.d.size);
  return mscclppSuccess;
}

/* A transport's RemoteError may name the wrong rank: the connection to a survivor that gave up
 * after another rank died. The bootstrap knows which rank died first; its word wins. */
mscclppResult_t connection_explained(struct mscclppConnection* conn, mscclppResult_t res) {
  if (res != mscclppRemoteError) return res;
  mscclppResult_t why = bootstrap_explain(conn->comm->boot, conn->t.peer, EXPLAIN_GRACE_MS);
  return why != mscclppSuccess ? why : res;
}

mscclppResult_t mscclppConnectionWrite(mscclppConnection_t conn, mscclppRegMem_t dst, uint64_t dstOffset,
                                       mscclppRegMem_t src, uint64_t srcOffset, uint64_t size) {
  err_clear();
  HANDLE_CHECK(HANDLE_CONNECTION, conn);
  HANDLE_CHECK_OPT(HANDLE_REGMEM, dst);
  HANDLE_CHECK_OPT(HANDLE_REGMEM, src);
  MPP_CHECK(connection_check_dst(conn, dst, dstOffset, size));
  MPP_CHECK(check_src(conn, src, srcOffset, size));
  return connection_explained(conn, conn->ops->write(&conn->t, &dst->t, dstOffset, &src->t, srcOffset, size));
}

mscclppResult_t connection_write_host(struct mscclppConnection* conn, struct mscclppRegMem* dst, uint64_t dst_off,
                                      const void* src, uint64_t size) {
  MPP_CHECK(connection_check_dst(conn, dst, dst_off, size));
  if (conn->ops->write_host == NULL)
    return MPP_ERR(mscclppInvalidUsage, "%s connection to rank %d: no host-memory write path", conn->ops->name, conn->t.peer);
  return connection_explained(conn, conn->ops->write_host(&conn->t, &dst->t, dst_off, src, size));
}

mscclppResult_t connection_read_host(struct mscclppConnection* conn, void* dst, struct mscclppRegMem* src,
                                     uint64_t src_off, uint64_t size) {
  MPP_CHECK(connection_check_dst(conn, src, src_off, size)); /* the same rules: the peer's, in bounds, reachable */
  if (conn->ops->read_host == NULL)
    return MPP_ERR(mscclppInvalidUsage, "%s connection to rank %d: no read path", conn->ops->name, conn->t.peer);
  return connection_explained(conn, conn->ops->read_host(&conn->t, dst, &src->t, src_off, size));
}

mscclppResult_t mscclppConnectionUpdateAndSync(mscclppConnection_t conn, mscclppRegMem_t dst, uint64_t dstOffset,
                                               uint64_t* src, uint64_t newValue) {
  err_clear();
  MPP_CHECK_ARG(src != NULL, "mscclppConnectionUpdateAndSync: src is NULL");
  HANDLE_CHECK(HANDLE_CONNECTION, conn);
  HANDLE_CHECK_OPT(HANDLE_REGMEM, dst);
  MPP_CHECK_ARG(dstOffset % 8 == 0, "mscclppConnectionUpdateAndSync: offset %llu is not 8-byte aligned",
                (unsigned long long)dstOffset);
  MPP_CHECK(connection_check_dst(conn, dst, dstOffset, 8));
  if (conn->ops->maps_memory && ((uintptr_t)dst->t.ptr + dstOffset) % 8 != 0)
    return MPP_ERR(mscclppInvalidArgument, "mscclppConnectionUpdateAndSync: rank %d's word at offset %llu is not 8-byte aligned",
                   conn->t.peer, (unsigned long long)dstOffset);
  *src = newValue;
  return connection_explained(conn, conn->ops->update_and_sync(&conn->t, &dst->t, dstOffset, newValue));
}

mscclppResult_t mscclppConnectionFlush(mscclppConnection_t conn, int64_t timeoutMs) {
  err_clear();
  HANDLE_CHECK(HANDLE_CONNECTION, conn);
  int64_t timeout = timeoutMs < 0 ? param_int(PARAM_FLUSH_TIMEOUT) : timeoutMs;
  const int64_t max_ms = 1ll << 40; /* about 35 years: keeps the deadline arithmetic in range */
  return connection_explained(conn, conn->ops->flush(&conn->t, timeout > max_ms ? max_ms : timeout));
}

void connection_free(struct mscclppConnection* conn, int abort) {
  if (conn == NULL) return;
  handle_remove(HANDLE_CONNECTION, conn);
  comm_objects_untrack(conn->comm, &conn->link);
  conn->ops->close(&conn->t, abort);
  free(conn);
}

mscclppResult_t mscclppConnectionDestroy(mscclppConnection_t conn) {
  err_clear();
  MPP_CHECK(handle_check(HANDLE_CONNECTION, conn, __func__));
  if (conn->nsems > 0)
    return MPP_ERR(mscclppInvalidUsage, "mscclppConnectionDestroy: %d host semaphores still use the connection to rank %d",
                   conn->nsems, conn->t.peer);
  MPP_CHECK(handle_retire(HANDLE_CONNECTION, conn, __func__)); /* refused while another thread's call uses it */
  connection_free(conn, 0);
  return mscclppSuccess;
}

/* True when process pid is known to have exited: no such process, or a zombie not yet reaped. */
static int pid_gone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "re");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* paren = strrchr(buf, ')'); /* "pid (comm) S ...": the state follows the last ')' */
  return paren != NULL && paren[1] == ' ' && paren[2] == 'Z';
}

/* 1 when peer's pid means the same process here: same host and same PID namespace (a pid of
 * another namespace names another process, or none, in ours). */
static int pid_comparable(struct mscclppComm* comm, int peer) {
  const struct peer_info* p = &comm->peers[peer];
  uint64_t mine = comm->peers[comm->rank].pid_ns;
  return transport_same_host(&comm->tc, peer) && p->pid > 0 && mine != 0 && p->pid_ns == mine;
}

mscclppResult_t comm_peer_alive(struct mscclppComm* comm, int peer) {
  /* The bootstrap's ring tells of any rank's death or failure, across hosts and namespaces, naming
   * the rank that died; the pid adds nothing it misses but a check that needs no progress thread. */
  MPP_CHECK(bootstrap_health(comm->boot));
  const struct peer_info* p = &comm->peers[peer];
  if (pid_comparable(comm, peer) && pid_gone(p->pid)) {
    bootstrap_report_death(comm->boot, peer); /* the others learn it from us, not from our exit */
    return MPP_ERR(mscclppRemoteError, "rank %d (pid %d) has exited", peer, p->pid);
  }
  return mscclppSuccess;
}

mscclppResult_t connection_peer_alive(struct mscclppConnection* conn) {
  MPP_CHECK(bootstrap_health(conn->comm->boot));
  if (conn->ops->status != NULL) {
    mscclppResult_t res = conn->ops->status(&conn->t);
    if (res != mscclppSuccess) {
      mscclppResult_t why = bootstrap_explain(conn->comm->boot, conn->t.peer, EXPLAIN_GRACE_MS);
      return why != mscclppSuccess ? why : res;
    }
  }
  return comm_peer_alive(conn->comm, conn->t.peer);
}
