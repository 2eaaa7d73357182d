/* bootstrap.h - the TCP rendezvous that connects a communicator's ranks before anything else:
 * unique ids, the root, ring allgather, barrier and tagged point-to-point messages. Every wait is
 * bounded by the bootstrap's timeout; a peer that dies makes every survivor's pending and later
 * calls fail (RemoteError or Timeout) instead of hanging. Depends only on util/. */
#ifndef MPP_BOOTSTRAP_BOOTSTRAP_H_
#define MPP_BOOTSTRAP_BOOTSTRAP_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/comm.h>

struct bootstrap;

/* Fills id with a fresh random secret and the address of a root that this call starts (a thread
 * serving one rendezvous of up to the nranks the first rank announces, then exiting). */
mscclppResult_t bootstrap_unique_id(mscclppUniqueId* id);

/* Builds the id for mscclppCommInitRank's "host:port" (IPv4, [IPv6] or a host name). Rank 0 also
 * starts the root listening on that port. Such ids carry a secret derived from
 * MSCCLPP_BOOTSTRAP_SECRET, else from the launcher's job id, else a public one (no authentication,
 * warned about once by rank 0); docs/security.md. */
mscclppResult_t bootstrap_id_from_address(const char* host_port, int rank, mscclppUniqueId* id);

/* Stops the root of id if this process runs it and it still waits (a failed init of rank 0): the
 * ranks that joined fail at once, told that rank 0's init failed, and the port is free for a retry.
 * When this process ran out of fds, the root instead tells every rank so for its last seconds (a
 * retry needs a higher limit anyway). A no-op otherwise. */
void bootstrap_root_stop(const mscclppUniqueId* id);

/* Joins the rendezvous named by id as rank of nranks. timeout_ms bounds every later wait. */
mscclppResult_t bootstrap_init(const mscclppUniqueId* id, int rank, int nranks, int timeout_ms, struct bootstrap** out);

#define BOOTSTRAP_KEY_BYTES 32
/* Derives a key for another layer's connections from b's secret (HKDF-SHA256; `purpose` is the
 * salt, context, e.g. the communicator id, the info): equal on every rank of b, unknown to anyone
 * without the job's secret, different per purpose and context. */
mscclppResult_t bootstrap_derive_key(const struct bootstrap* b, const char* purpose, uint64_t context,
                                     uint8_t key[BOOTSTRAP_KEY_BYTES]);

int bootstrap_rank(const struct bootstrap* b);
int bootstrap_nranks(const struct bootstrap* b);

/* data holds nranks slots of bytes_per_rank; slot rank is ours, the others are filled in. */
mscclppResult_t bootstrap_allgather(struct bootstrap* b, void* data, size_t bytes_per_rank);
mscclppResult_t bootstrap_barrier(struct bootstrap* b);
/* Messages between a pair with one tag arrive in order; recv's size must equal send's. */
mscclppResult_t bootstrap_send(struct bootstrap* b, int peer, int tag, const void* data, size_t size);
mscclppResult_t bootstrap_recv(struct bootstrap* b, int peer, int tag, void* data, size_t size);
/* bootstrap_recv without waiting: *got = 1 and the message in data when one from peer with tag
 * is queued, else *got = 0 (Success). */
mscclppResult_t bootstrap_try_recv(struct bootstrap* b, int peer, int tag, void* data, size_t size, int* got);

/* Swaps size bytes with peer under tag: the lower rank sends first, so that neither blocking nor
 * buffered sends can deadlock. */
mscclppResult_t bootstrap_swap(struct bootstrap* b, int peer, int tag, const void* mine, void* theirs, size_t size);

/* ---- tags of the library's own messages -------------------------------------------------------
 * User code (mscclppBootstrapSend/Recv) uses tags >= 0. Every internal message uses a negative tag,
 * INT32_MIN | purpose << 24 | (user tag & 0xffffff), where purpose (1..127) says which layer sends
 * it and the user tag is, for instance, a connection's tag. Internal tags thus never collide with
 * user tags, nor with another layer's. */
enum boot_tag_purpose {
  BOOT_TAG_CONN = 1, /* connection handshake (core/connection.c) */
  BOOT_TAG_TCP = 2,  /* tcp transport's socket addresses (transport/tcp.c) */
  BOOT_TAG_SEM = 3,  /* host semaphore token exchange (core/semaphore.c) */
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


/* Closes every socket at once so that peers blocked on this rank fail promptly; later calls on b
 * return Aborted. Safe to call from another thread while a call is blocked. */
void bootstrap_abort(struct bootstrap* b);
/* Success while b knows of no rank that died or failed; else RemoteError naming that rank
 * (SystemError when it is this rank's own failure). Takes a lock: cheap. Works across hosts and
 * PID namespaces (it comes from the ring's sockets, see liveness.c). */
mscclppResult_t bootstrap_health(struct bootstrap* b);
/* Nonzero once bootstrap_health would fail (a death or failure was learnt of); no lock taken, for
 * the collectives' per-call check. */
int bootstrap_faulted(struct bootstrap* b);
/* After a connection to peer ended: waits up to grace_ms for b to learn why. The error naming the
 * rank that died or failed (which may be another one than peer: the one that died first), or peer's
 * departure; Success when b learnt nothing (the caller's own error stands). */
mscclppResult_t bootstrap_explain(struct bootstrap* b, int peer, int grace_ms);

/* A transport learnt that peer's process is gone (e.g. its pid exited on this host): b records the
 * death and tells both ring neighbours, as when it sees the death itself, so that every survivor
 * names peer, even if this rank exits right after. Nothing when b already knows of a fault. */
void bootstrap_report_death(struct bootstrap* b, int peer);

/* Frees b (after abort, or when every peer is done with it). */
void bootstrap_destroy(struct bootstrap* b);

/* What launchers put in the environment (see mscclppCommInitFromEnv). */
struct launch_env {
  int rank, nranks, local_rank; /* local_rank -1 when no launcher said */
  char root[300];               /* "host:port": the bootstrap root's, or the launcher's store */
  int via_store;                /* 1: root is torchrun's TCPStore, the id goes through it */
};
/* Reads rank, size, local rank and root address from the first launcher whose variables are set.
 * Under torchrun with its agent's store (TORCHELASTIC_USE_AGENT_STORE=True) and no
 * MSCCLPP_MASTER_PORT, MASTER_ADDR:MASTER_PORT is that store: via_store is set. A missing or
 * malformed variable is InvalidUsage naming it. */
mscclppResult_t launch_env_read(struct launch_env* env);

/* The unique id of an init from env->via_store's store: rank 0 makes one (bootstrap_unique_id: a
 * root on a free port of this host, a random secret) and publishes it, or publishes why it could
 * not, which every other rank then reports at once; the others wait for it (bootstrap timeout).
 * Every rank must make its inits from the environment in the same order (the n-th init of every
 * rank meets the n-th of the others). */
mscclppResult_t launch_store_id(const struct launch_env* env, mscclppUniqueId* id);

#endif /* MPP_BOOTSTRAP_BOOTSTRAP_H_ */
