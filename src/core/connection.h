/* connection.h - connections and host semaphores inside the library.
 *
 * Internal bootstrap messages use the tags of bootstrap/bootstrap.h (boot_tag). The connection
 * handshake uses user tag 0 for every connection of a pair (so a tag mismatch is detected, not
 * waited on) and carries the full connection tag, which both sides compare; the messages after it
 * use the connection's tag. Connections (and semaphores) of one pair are therefore created in the
 * same order on both sides, one at a time. */
#ifndef MPP_CORE_CONNECTION_H_
#define MPP_CORE_CONNECTION_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/connection.h>

#include "bootstrap/bootstrap.h"
#include "core/regmem.h"
#include "transport/transport.h"

struct mscclppConnection {
  struct list_node link; /* in the communicator's list of open connections (first member) */
  struct mscclppComm* comm;
  const struct transport_ops* ops; /* its row */
  mscclppTransport_t transport;    /* never Auto */
  int nsems;                       /* host semaphores built on it (destroy them first) */
  struct transport_conn t;         /* peer, tag and the transport's state (t.tc is &comm->tc) */
};

/* Checks that dst (size bytes at dst_off) can be written through conn: a buffer of conn's peer,
 * imported into conn's communicator, in bounds, and reachable by conn's transport here. */
mscclppResult_t connection_check_dst(struct mscclppConnection* conn, struct mscclppRegMem* dst, uint64_t dst_off,
                                     uint64_t size);

/* For the library's own users of peers it cannot map (the CPU plan executor over tcp): copies size
 * bytes of host memory src into the peer's dst+dst_off (as mscclppConnectionWrite, whose source
 * must be registered), and reads size bytes of the peer's src+src_off into host memory dst,
 * returning once they are there (after every earlier write and update of conn). InvalidUsage
 * when conn's transport has no such path (it maps the peer's memory instead). */
mscclppResult_t connection_write_host(struct mscclppConnection* conn, struct mscclppRegMem* dst, uint64_t dst_off,
                                      const void* src, uint64_t size);
mscclppResult_t connection_read_host(struct mscclppConnection* conn, void* dst, struct mscclppRegMem* src,
                                     uint64_t src_off, uint64_t size);


/* Closes conn (abort != 0: without waiting for the peer or the device) and frees it. */
void connection_free(struct mscclppConnection* conn, int abort);

struct mscclppHostSemaphore;
/* Releases a semaphore's memory and frees it. */
void semaphore_free(struct mscclppHostSemaphore* sem);

/* RemoteError when the bootstrap knows of a rank that died or failed (naming it), or when peer, a
 * rank of this host and PID namespace, has exited (its pid is gone or a zombie); Success otherwise.
 * A lock, a syscall and a /proc read: call it every few milliseconds at most. */
mscclppResult_t comm_peer_alive(struct mscclppComm* comm, int peer);

/* RemoteError when the peer of conn is known to be gone (comm_peer_alive, or the transport saw the
 * connection close: then the error names the rank that the bootstrap knows died first, waiting up
 * to half a second to learn it). Cheap enough to call every few milliseconds. */
mscclppResult_t connection_peer_alive(struct mscclppConnection* conn);

/* res of an operation on conn; a RemoteError is replaced by the bootstrap's word on which rank
 * died first (bootstrap_explain, up to half a second), which may be another rank than conn's. */
mscclppResult_t connection_explained(struct mscclppConnection* conn, mscclppResult_t res);

#endif /* MPP_CORE_CONNECTION_H_ */
