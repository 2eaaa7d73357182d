/* transport.h - the transports behind connections and registered memory, as static const ops
 * tables (shm.c, tcp.c, cudaipc.c), and what they keep per communicator (transports.c).
 *
 * Registration asks every transport to export a local buffer (each one that can reach it fills its
 * part of the blob and sets its bit); deserialization asks every transport whose bit is set to
 * import it (map it where this rank can). A connection uses one transport's data path. The core
 * (connection.c) checks every argument before calling write/update_and_sync, so the ops see
 * in-bounds offsets, a dst imported from the connection's peer and a local src. */
#ifndef MPP_TRANSPORT_TRANSPORT_H_
#define MPP_TRANSPORT_TRANSPORT_H_

#include <pthread.h>
#include <stdint.h>

#include <mscclpp/connection.h>

#include "core/comm.h"
#include "core/connection.h"
#include "core/regmem.h"

struct fd_service;

struct transport_ops {
  const char* name;
  mscclppTransport_t id;
  /* Describes local memory mem (ptr, size and what info says backs it) in mem->d when this
   * transport can reach it, setting its bit; leaves mem->d alone otherwise. */
  mscclppResult_t (*export_mem)(struct mscclppRegMem* mem, const struct mem_info* info);
  void (*unexport_mem)(struct mscclppRegMem* mem);
  /* Maps or prepares a peer's memory whose blob offers this transport, when this rank can reach
   * it (sets mem->ptr when mapped); Success without doing anything when it cannot. */
  mscclppResult_t (*import_mem)(struct mscclppRegMem* mem);
  void (*unimport_mem)(struct mscclppRegMem* mem);
  /* Pairwise setup with conn->peer (both sides call it) through bootstrap_send/recv. */
  mscclppResult_t (*connect)(struct mscclppConnection* conn);
  mscclppResult_t (*write)(struct mscclppConnection* conn, struct mscclppRegMem* dst, uint64_t dst_off,
                           struct mscclppRegMem* src, uint64_t src_off, uint64_t size);
  /* Stores new_value as one 64-bit word at dst+dst_off after every earlier write of conn. */
  mscclppResult_t (*update_and_sync)(struct mscclppConnection* conn, struct mscclppRegMem* dst, uint64_t dst_off,
                                     uint64_t new_value);
  /* Optional (NULL: the transport maps the peer's memory, where plain loads and stores do). Copies
   * size bytes of this process's host memory src into dst+dst_off, ordered as write. */
  mscclppResult_t (*write_host)(struct mscclppConnection* conn, struct mscclppRegMem* dst, uint64_t dst_off,
                                const void* src, uint64_t size);
  /* Optional, as write_host. Copies size bytes at src+src_off of the peer's memory into host
   * memory dst and returns once they are there; ordered after every earlier write and update of
   * conn (a read sees what this rank wrote before it). */
  mscclppResult_t (*read_host)(struct mscclppConnection* conn, void* dst, struct mscclppRegMem* src, uint64_t src_off,
                               uint64_t size);
  /* Waits, at most timeout_ms, until every earlier write and update has landed at the peer. */
  mscclppResult_t (*flush)(struct mscclppConnection* conn, int64_t timeout_ms);
  /* RemoteError when the transport knows the peer is gone; NULL: nothing to ask. */
  mscclppResult_t (*status)(struct mscclppConnection* conn);
  /* Frees conn->priv; abort != 0: without waiting for the peer or the device. */
  void (*close)(struct mscclppConnection* conn, int abort);
};

extern const struct transport_ops shm_transport;
extern const struct transport_ops tcp_transport;
extern const struct transport_ops cudaipc_transport;

/* The ops of t, or NULL when there is no such transport in this library (IB, unknown values). */
const struct transport_ops* transport_get(mscclppTransport_t t);
const char* transport_name(mscclppTransport_t t);

/* Resolves the transport conn between this rank and peer uses. Auto: P2P when both are GPU ranks
 * of one host (and the build has CUDA), else SHM on one host, else TCP, computed from the
 * allgathered peer info only, so both sides agree. A forced transport the two cannot use is
 * InvalidUsage saying why. */
mscclppResult_t transport_resolve(struct mscclppComm* comm, int peer, mscclppTransport_t want, mscclppTransport_t* out);

/* What the transports keep per communicator (comm->tstate). */
struct transport_state {
  pthread_mutex_t lock; /* guards the three lists */
  struct list_node mems, conns, sems;
  struct region_table regions; /* local buffers the tcp receivers write */
  struct fd_service* fds;      /* hands out fds of exported memfd / cuMem memory */
};

/* Adds or removes an object of the communicator's lists (under the state's lock). */
void tstate_track(struct mscclppComm* comm, struct list_node* list, struct list_node* node);
void tstate_untrack(struct mscclppComm* comm, struct list_node* node);

/* True when rank r of comm is on this rank's host. */
int same_host(const struct mscclppComm* comm, int r);

#endif /* MPP_TRANSPORT_TRANSPORT_H_ */
