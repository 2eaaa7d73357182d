/* connection.h - connections and host semaphores inside the library, and the bootstrap tags that
 * the library uses for its own messages.
 *
 * Bootstrap tag scheme: user code (mscclppBootstrapSend/Recv) uses tags >= 0. Every internal
 * message uses a negative tag, INT32_MIN | purpose << 24 | (user tag & 0xffffff), where purpose
 * (1..127) says which layer sends it and the user tag is the connection's tag. Internal tags thus
 * never collide with user tags, nor with another layer's. The connection handshake itself uses
 * user tag 0 for every connection of a pair (so a tag mismatch is detected, not waited on) and
 * carries the full connection tag, which both sides compare; the messages after it use the
 * connection's tag. Connections (and semaphores) of one pair are therefore created in the same
 * order on both sides, one at a time. */
#ifndef MPP_CORE_CONNECTION_H_
#define MPP_CORE_CONNECTION_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/connection.h>

#include "core/regmem.h"

enum boot_tag_purpose {
  BOOT_TAG_CONN = 1, /* connection handshake (connection.c) */
  BOOT_TAG_TCP = 2,  /* tcp transport's socket addresses (tcp.c) */
  BOOT_TAG_SEM = 3,  /* host semaphore token exchange (semaphore.c) */
  BOOT_TAG_CHAN = 4,    /* device semaphore token exchange (channel/tokens.c) */
  BOOT_TAG_SWITCH = 5,  /* switch channel buffer exchange, tag = group hash (channel/switch_channel.c) */
  BOOT_TAG_DEVCONN = 6, /* seed API buffer exchange (proxy/devconn.c) */
  BOOT_TAG_ALGO = 7,    /* collectives' scratch exchange (algo/cpu/net.c, algo/gpu/setup.c) */
  BOOT_TAG_EXEC = 8,    /* GPU plan executor's channel, scratch and buffer exchanges (exec/gpu/state.c) */
};

/* The bootstrap tag of an internal message of purpose about the connection tagged tag. */
static inline int boot_tag(enum boot_tag_purpose purpose, int tag) {
  return (int)(0x80000000u | ((uint32_t)purpose << 24) | ((uint32_t)tag & 0xffffffu));
}

struct transport_ops;

struct mscclppConnection {
  struct list_node link; /* in the communicator's list of open connections (first member) */
  struct mscclppComm* comm;
  const struct transport_ops* ops;
  mscclppTransport_t transport; /* never Auto */
  int peer;
  int tag;
  int nsems;  /* host semaphores built on it (destroy them first) */
  void* priv; /* the transport's per-connection state */
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

/* Swaps size bytes with peer through the bootstrap under tag, the lower rank sending first (so
 * that neither blocking nor buffered sends can deadlock). */
mscclppResult_t boot_swap(struct mscclppComm* comm, int peer, int tag, const void* mine, void* theirs, size_t size);

/* Closes conn (abort != 0: without waiting for the peer or the device) and frees it. */
void connection_free(struct mscclppConnection* conn, int abort);

struct mscclppHostSemaphore;
/* Releases a semaphore's memory and frees it. */
void semaphore_free(struct mscclppHostSemaphore* sem);

/* RemoteError when peer, a rank of this host, is known to have exited (its pid is gone or a
 * zombie); Success otherwise, and for ranks of other hosts. A syscall and a /proc read: call it
 * every few milliseconds at most. */
mscclppResult_t comm_peer_alive(struct mscclppComm* comm, int peer);

/* RemoteError when the peer of conn is known to be gone (its process on this host exited, or the
 * transport saw the connection close). Cheap enough to call every few milliseconds. */
mscclppResult_t connection_peer_alive(struct mscclppConnection* conn);

#endif /* MPP_CORE_CONNECTION_H_ */
