/* transport.h - the transports behind connections and registered memory. Each transport is one
 * file (shm.c, tcp.c, cudaipc.c) defining one `static const struct transport_ops` row, and one line
 * in table.c's list of rows; nothing else names a transport.
 *
 * This layer sees a communicator as struct transport_comm (identity, bootstrap, the peer table and
 * one state slot per transport), a registered buffer as struct transport_mem and a connection as
 * struct transport_conn. core/ embeds these in its own objects and fills them; the transports never
 * see core's structures.
 *
 * Registration asks every row to export a local buffer (each one that can reach it fills its part
 * of the description and sets its bit); import asks every row whose bit is set to map or prepare a
 * peer's buffer. A connection uses one row's data path. core/ checks every argument before calling
 * write/update_and_sync, so the ops see in-bounds offsets, a dst imported from the connection's
 * peer and a local src. */
#ifndef MPP_TRANSPORT_TRANSPORT_H_
#define MPP_TRANSPORT_TRANSPORT_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/connection.h>
#include <mscclpp/memory.h>

#include "bootstrap/bootstrap.h"
#include "sys/memalloc.h"

/* Transport ids are mscclppTransport_t values but Auto (whose slot stays unused): 0 .. Net. */
#define TRANSPORT_IDS ((int)mscclppTransportNet + 1)
/* Whether t names a transport or Auto (any value a caller may pass). */
static inline int transport_valid(int t) { return t >= (int)mscclppTransportP2P && t <= (int)mscclppTransportNet; }
/* Bit of mscclppTransport_t t in regmem_desc.transports. */
#define TRANSPORT_BIT(t) (1u << (unsigned)(t))

/* What every rank tells the others at init (core allgathers it, fixed layout); transports choose
 * by it (same host, rank kinds). */
struct peer_info {
  int32_t rank;
  int32_t kind;     /* mscclppRankKind_t: Cpu or Gpu */
  int32_t cuda_dev; /* -1 for CPU ranks */
  int32_t pid;
  uint64_t host_hash; /* equal for ranks of one host (host name + boot id, or MSCCLPP_HOSTID; + net ns) */
  uint64_t comm_id;   /* rank 0's value is the communicator's id */
  uint64_t pid_ns;    /* inode of /proc/self/ns/pid (0: unknown): pids compare only within one */
  char bus_id[16];    /* PCI bus id of the GPU, "" for CPU ranks */
};

struct fd_service;

/* A communicator as the transports see it: filled by core before transport_comm_start, read-only
 * afterwards except for each transport's own state slot. */
struct transport_comm {
  uint64_t comm_id;
  int rank, nranks;
  int kind;       /* this rank's mscclppRankKind_t */
  int cuda_dev;   /* -1 for CPU ranks */
  int timeout_ms; /* bound of bootstrap exchanges and fd fetches */
  struct bootstrap* boot;
  const struct peer_info* peers; /* nranks entries */
  struct fd_service* fds;        /* hands out fds of exported memfd / cuMem memory (shm, cuda-ipc) */
  void* state[TRANSPORT_IDS];    /* each transport's per-communicator state (its start/stop) */
};

/* True when rank r of tc is on this rank's host. */
static inline int transport_same_host(const struct transport_comm* tc, int r) {
  return tc->peers[r].host_hash == tc->peers[tc->rank].host_hash;
}

/* ---- registered memory ------------------------------------------------------------------------ */

/* The most bytes of its own a transport adds to a buffer's description. */
#define TRANSPORT_PART_BYTES 96

/* A transport's own fields of a buffer's description (each transport casts it to its struct). */
union transport_part {
  uint64_t align;
  uint8_t bytes[TRANSPORT_PART_BYTES];
};

/* Everything a peer learns about a registered buffer (blob.c: the wire form). */
struct regmem_desc {
  uint64_t comm_id;
  int32_t owner;       /* rank that owns the memory */
  int32_t pid;         /* owner's process id */
  uint64_t host_hash;  /* owner's host */
  uint32_t transports; /* TRANSPORT_BIT()s of the transports that can reach it */
  int32_t kind;        /* enum mem_kind */
  int32_t cuda_dev;    /* owner's device for CUDA kinds, else -1 */
  uint64_t size;       /* registered bytes */
  uint64_t alloc_size; /* SHM/CUDA kinds: the allocation's bytes (>= alloc_offset + size) */
  uint64_t alloc_offset;                   /* where the buffer starts in the allocation */
  union transport_part part[TRANSPORT_IDS]; /* by transport id: what that transport added */
};

/* A registered buffer (local, or a peer's imported here) as the transports see it. */
struct transport_mem {
  struct transport_comm* tc;
  struct regmem_desc d;
  int local;     /* 1: this rank owns it */
  void* ptr;     /* local: the registered address; imported: where it is mapped, or NULL */
  int is_device; /* ptr is GPU memory */
  /* Resources of an import, released by the transport that made them. */
  void* map_base; /* shm: mmap'ed range / cuda-ipc: what was opened or reserved */
  size_t map_len;
  uint64_t handle; /* cuda VMM: the imported allocation handle */
};

/* ---- connections ------------------------------------------------------------------------------ */

struct transport_conn {
  struct transport_comm* tc;
  int peer;
  int tag;
  void* priv; /* the transport's per-connection state */
};

/* ---- the row ---------------------------------------------------------------------------------- */

struct transport_ops {
  const char* name;     /* the implementation, in logs: "cuda-ipc", "shm", "tcp" */
  const char* api_name; /* the mscclppTransport_t value's name: "p2p", "shm", "tcp" */
  mscclppTransport_t id;
  uint32_t mem_kinds;    /* bits (1 << enum mem_kind) of the memory it may describe */
  uint32_t token_import; /* TRANSPORT_BIT()s with which a host semaphore over this transport imports
                            the peer's (host-memory) token: its own, and any that maps it for it */
  int maps_memory;       /* 1: an import maps the peer's memory (ptr), which plain stores reach */
  const char* unreachable_why; /* why a valid buffer of the peer cannot be reached through it */
  size_t part_wire_bytes;      /* bytes of its part in the blob (<= TRANSPORT_PART_BYTES) */

  /* Why this rank cannot connect with peer over this transport; NULL when it can. */
  const char* (*unusable)(const struct transport_comm* tc, int peer);
  /* Optional: makes / frees this transport's per-communicator state (tc->state[id]). */
  mscclppResult_t (*start)(struct transport_comm* tc);
  void (*stop)(struct transport_comm* tc);
  /* The part's wire form (part_wire_bytes at out), and back with its checks (InvalidArgument naming
   * the field; called only when the transport's bit is set). */
  void (*encode_part)(const union transport_part* part, uint8_t* out);
  mscclppResult_t (*decode_part)(const uint8_t* in, const struct regmem_desc* d, union transport_part* part);

  /* Describes local memory mem (ptr, size and what info says backs it) in its part when this
   * transport can reach it, setting its bit; leaves mem->d alone otherwise. */
  mscclppResult_t (*export_mem)(struct transport_mem* mem, const struct mem_info* info);
  void (*unexport_mem)(struct transport_mem* mem);
  /* Maps or prepares a peer's memory whose blob offers this transport, when this rank can reach
   * it (sets mem->ptr when mapped); Success without doing anything when it cannot. */
  mscclppResult_t (*import_mem)(struct transport_mem* mem);
  void (*unimport_mem)(struct transport_mem* mem);
  /* Pairwise setup with conn->peer (both sides call it) through the bootstrap. */
  mscclppResult_t (*connect)(struct transport_conn* conn);
  mscclppResult_t (*write)(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                           struct transport_mem* src, uint64_t src_off, uint64_t size);
  /* Stores new_value as one 64-bit word at dst+dst_off after every earlier write of conn. */
  mscclppResult_t (*update_and_sync)(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                     uint64_t new_value);
  /* Optional (NULL: the transport maps the peer's memory, where plain loads and stores do). Copies
   * size bytes of this process's host memory src into dst+dst_off, ordered as write. */
  mscclppResult_t (*write_host)(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                const void* src, uint64_t size);
  /* Optional, as write_host. Copies size bytes at src+src_off of the peer's memory into host
   * memory dst and returns once they are there; ordered after every earlier write and update of
   * conn (a read sees what this rank wrote before it). */
  mscclppResult_t (*read_host)(struct transport_conn* conn, void* dst, struct transport_mem* src, uint64_t src_off,
                               uint64_t size);
  /* Waits, at most timeout_ms, until every earlier write and update has landed at the peer. */
  mscclppResult_t (*flush)(struct transport_conn* conn, int64_t timeout_ms);
  /* RemoteError when the transport knows the peer is gone; NULL: nothing to ask. */
  mscclppResult_t (*status)(struct transport_conn* conn);
  /* Frees conn->priv; abort != 0: without waiting for the peer or the device. */
  void (*close)(struct transport_conn* conn, int abort);
};

/* ---- the table (table.c) ---------------------------------------------------------------------- */

/* The rows, in the order registration exports and imports and Auto prefers them. */
const struct transport_ops* const* transport_rows(int* count);
/* The row of t, or NULL when there is none in this library (IB, Auto, unknown values). */
const struct transport_ops* transport_get(mscclppTransport_t t);
/* "p2p", "shm", "ib", "tcp", "net", "auto", "unknown". */
const char* transport_name(mscclppTransport_t t);

/* Resolves the transport between this rank and peer. Auto: the first row that can connect them
 * (cuda-ipc for two GPU ranks of one host, else shm on one host, else net where it is on, else tcp), computed from the
 * allgathered peer table only, so both sides agree. A forced transport the two cannot use is
 * InvalidUsage saying why. */
mscclppResult_t transport_resolve(const struct transport_comm* tc, int peer, mscclppTransport_t want,
                                  mscclppTransport_t* out);

/* Starts what the transports keep per communicator (the fd service, each row's start) once tc's
 * identity and peer table are filled; stops it all (never waiting for peers). */
mscclppResult_t transport_comm_start(struct transport_comm* tc);
void transport_comm_stop(struct transport_comm* tc);

/* ---- the blob (blob.c) ------------------------------------------------------------------------ */

#define REGBLOB_MAGIC 0x4d52504du /* "MPRM" little endian */
#define REGBLOB_VERSION 4

/* The blob's length: the common fields, every row's part and the checksum (216 bytes with today's
 * rows; at most MSCCLPP_REGMEM_BLOB_BYTES, which regblob_check_rows checks). */
size_t regblob_bytes(void);

/* InternalError unless every row's part fits TRANSPORT_PART_BYTES and the blob fits
 * MSCCLPP_REGMEM_BLOB_BYTES (checked when a communicator starts its transports). */
mscclppResult_t regblob_check_rows(void);

/* Writes d as regblob_bytes() bytes (checksummed) into out. */
void regblob_encode(const struct regmem_desc* d, uint8_t* out);

/* Parses and validates a blob of len bytes against the receiving communicator (its comm_id and
 * nranks): length, magic, version, checksum, comm id, owner rank, kind, transports, that size,
 * offset and allocation size are consistent without overflow, and each offered transport's part.
 * Every failure is InvalidArgument naming the field. */
mscclppResult_t regblob_decode(const void* blob, size_t len, uint64_t comm_id, int nranks, struct regmem_desc* d);

#endif /* MPP_TRANSPORT_TRANSPORT_H_ */
