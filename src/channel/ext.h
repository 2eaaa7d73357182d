/* ext.h - what the channels keep per communicator, beside it (the communicator struct itself is
 * not theirs to grow): the device-error record every wait reports into, the pool of semaphore
 * tokens and the cache of peers' token memory imported here (tokens.c), and one slot per upper
 * layer (the proxy's seed API) with a finalizer.
 *
 * Found by communicator pointer and id in a process-wide registry, made on first use, released by
 * channels_comm_fini (mscclppCommReleaseChannels; communicator teardown should call it before it
 * frees the transports, so that the registrations and connections used here are still alive). */
#ifndef MPP_CHANNEL_EXT_H_
#define MPP_CHANNEL_EXT_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <mscclpp/device.h>
#include <mscclpp/memory.h>
#include <mscclpp/wait.h>

struct mscclppComm;
struct mscclppConnection;

/* Semaphore tokens: 128-byte slots (the 64-bit token first, this side's step counter at +64) cut
 * from slabs of registered memory: device memory for GPU ranks, shareable host memory for CPU
 * ranks. Slots are never reused, so every token starts at zero. */
#define TOKEN_SLOT_BYTES 128u
#define TOKEN_EXPECTED_OFFSET 64u
#define TOKEN_MAX_SLABS 64

struct token_slab {
  void* base;
  mscclppRegMem_t reg;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES]; /* reg serialized, sent with every token of the slab */
  size_t blob_len;
  uint64_t size, used;
};

/* A peer's slab imported here, found again by its blob. */
struct import_entry {
  struct import_entry* next;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
  size_t blob_len;
  mscclppRegMem_t mem;
};

/* An object of a layer above that uses a communicator's channels and must stop before they go (a
 * proxy service's thread): stop(arg) runs when the channel state is released (communicator teardown,
 * mscclppCommReleaseChannels), before the channels and connections are freed, on the releasing
 * thread. It must not call into the communicator. */
struct chan_dependent {
  void (*stop)(void* arg);
  void* arg;
  struct chan_dependent* next;
};

struct chan_ext {
  struct chan_dependent* dependents; /* under lock */
  struct mscclppComm* comm;
  pthread_mutex_t lock; /* guards the pool, the imports and the slots */
  int gpu;              /* a GPU rank: device memory and host-mapped records */
  int dev;              /* its CUDA device, else -1 */
  mscclppDeviceError* rec_host; /* the record as the host reads it */
  mscclppDeviceError* rec_wait; /* ... and as waits write it (the device's mapping for GPU ranks) */
  uint32_t* claim;              /* device memory (GPU ranks) or host memory: 0 until a timeout */
  struct token_slab slabs[TOKEN_MAX_SLABS];
  int nslabs;
  struct import_entry* imports;
};

/* The communicator's channel state (its COMM_EXT_CHANNELS slot), made (record allocated) on first
 * use and released at communicator teardown or by mscclppCommReleaseChannels. */
mscclppResult_t chan_ext_get(struct mscclppComm* comm, struct chan_ext** out);
/* Adds or removes d (its stop and arg set) among x's dependents. */
void chan_ext_depend(struct chan_ext* x, struct chan_dependent* d);
void chan_ext_undepend(struct chan_ext* x, struct chan_dependent* d);
/* The state if it exists, else NULL (never makes one). */
struct chan_ext* chan_ext_find(struct mscclppComm* comm);
/* 1, with the record's text in buf ("" when it cannot be worded), once a bounded device wait of
 * the communicator ran out; 0 (buf "") before. No lock: an atomic read of the record's flag. */
int chan_ext_device_record(const struct chan_ext* x, char* buf, size_t len);

/* Fills a wait info for waits of this rank on peer through channel. */
void ext_wait_info(const struct chan_ext* x, int peer, int channel, mscclppWaitInfo* w);

/* Makes dev current for the calling thread (no-op for -1 or without CUDA); returns the previous
 * device for ext_dev_leave. */
int ext_dev_enter(int dev);
void ext_dev_leave(int prev, int dev);

/* ---- tokens.c ---------------------------------------------------------------------------------- */

struct token_slot {
  uint64_t* token;    /* our token (the pointer waits use: device memory for GPU ranks) */
  uint64_t* expected; /* our step counter */
  int slab;
  uint64_t offset;    /* of the slot in its slab */
};

/* A peer's token as imported here. */
struct token_peer {
  mscclppRegMem_t mem; /* the peer's slab (owned by the import cache) */
  uint64_t offset;     /* of the token in it */
  uint64_t* ptr;       /* mapped here, or NULL (reachable only through the connection) */
};

/* Kinds of pairwise token exchanges (both sides must make the same kind). */
enum token_kind { TOKEN_MEMORY = 1, TOKEN_PORT = 2 };

/* Cuts a fresh slot from the pool (a new slab when the last is full). Caller holds x->lock. */
mscclppResult_t tokens_alloc(struct chan_ext* x, struct token_slot* out);
/* Sends our slot to conn's peer and imports theirs, the lower rank sending first. A side whose
 * allocation failed (local != Success) still sends, marked failed, so that both fail at once.
 * Caller does not hold x->lock. */
mscclppResult_t tokens_exchange(struct chan_ext* x, struct mscclppConnection* conn, enum token_kind kind,
                                mscclppResult_t local, const struct token_slot* mine, struct token_peer* theirs);
/* Imports a peer's blob, or returns the import made before for the same blob. Caller holds lock. */
mscclppResult_t ext_import(struct chan_ext* x, const void* blob, size_t len, mscclppRegMem_t* out);
/* Releases the pool and the imports (the comm must still be alive). */
void tokens_fini(struct chan_ext* x);

#endif /* MPP_CHANNEL_EXT_H_ */
