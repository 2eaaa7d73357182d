/* state.h - the GPU executor's host side: its per-communicator state (the COMM_EXT_EXEC slot of a
 * GPU rank) and the modules that fill it. What a call needs is made on first use and cached:
 *
 *   chans.c    a cuda-ipc connection per peer; per (peer, channel ordinal) a memory-channel
 *              semaphore or a port channel of the executor's proxy service; ports by memory
 *   scratch.c  the scratch: device memory, registered, imported by every peer; grown (doubling)
 *   (core/ubuf.c) user buffers: the allocation holding one is registered once (by address range,
 *              checked against the driver's buffer id); peers' allocations imported once
 *   ctx.c      a context per (input, output) pair of a call: every rank's buffers as mapped here
 *   image.c    a plan's device image (ops, references, slots, routes, per-plan device state)
 *   bind.c     per (image, context): the ports the plan's port puts use
 *   run.c      a call: look everything up, launch the kernel (kernel.cu)
 *
 * Steps that talk to peers (connections, scratch growth, a new context) are collective: every
 * rank reaches them in the same call, because every rank runs the same plans with the same sizes
 * and (contract, docs/plans.md) uses new buffers in the same calls. They may run while the stream
 * is captured into a CUDA graph (every rank captures the same calls): they enqueue nothing on it
 * nor on the legacy stream, and run in relaxed capture mode (run.c). */
#ifndef MPP_EXEC_GPU_STATE_H_
#define MPP_EXEC_GPU_STATE_H_

#include <pthread.h>
#include <stdint.h>

#include <mscclpp/connection.h>
#include <mscclpp/memory.h>
#include <mscclpp/port_channel.h>

#include "core/ubuf.h"
#include "exec/gpu/dev.h"

#define XG_MAX_ORD 64     /* channels of one type between one pair of ranks */
#define XG_MAX_SLOTS 4096 /* memory-channel semaphores, and port channels, per communicator */
#define XG_MAX_IMAGES 64  /* plans whose device image a communicator keeps */
#define XG_MAX_CTX 4096   /* buffer contexts a communicator keeps */
#define XG_SIZE_CACHE 8   /* (sizes, element size) pairs an image remembers as checked */
/* Where a buffer of a peer on another host "is" here: never mapped, never loaded or stored (the
 * plan may only put to it through port channels: exec_plan_unfit); port puts take offsets from it. */
#define XG_UNMAPPED ((char*)(uintptr_t)(1ull << 56))
#define XG_TAG_SCRATCH 1
#define XG_TAG_CTX 2

struct chan_ext;

/* Every rank's buffers of one (input, output) pair of this rank (ctx.c). */
struct xg_ctx {
  const char* send;
  const char* recv;
  uint64_t sb, rb, in_id, out_id;
  mscclppRegMem_t* mem; /* [rank * 2 + t]: the registration (local or imported) holding it */
  char** host;          /* [rank * 2 + t]: the buffer; then [2 * nranks + ...]: registration starts */
  char** dev;           /* device copy of host */
};

/* Per (image, context, scratch generation): the port ids of the plan's port puts and the blocks'
 * op tables (bind.c). */
struct xg_bind {
  const struct xg_ctx* ctx;
  int scr_gen;   /* the scratch they were made for */
  uint32_t* dev; /* [npch * 9], NULL without port puts */
  char* tab;     /* [nblocks * tab_stride] (dev.h: xg_win), NULL without op tables */
};

/* A plan's device image (image.c). */
struct xg_image {
  uint64_t plan_id;
  char* file;
  int nblocks, threads, maxptrs, npch;
  int lean;              /* every op may run in the lean kernel (launch.h) */
  size_t smem;
  void* mem;             /* one device allocation for every array below */
  struct xg_params p;    /* the image's part of the kernel's parameters */
  int32_t* pch_slot;     /* [npch]: plan-local port channel -> port channel slot */
  uint16_t* pch_need;    /* [npch]: bit dst_type * 3 + src_type: that port is used */
  struct xg_bind* binds;
  int nbinds, capbinds;
  struct {
    uint64_t in, out, esize;
  } sizes_ok[XG_SIZE_CACHE];
  int nsizes;
};

/* A port of the proxy service, found again by (semaphore, dst, src) (bind.c). */
struct xg_port {
  int sem;
  mscclppRegMem_t dst, src;
  uint32_t id;
};

struct xg_state {
  struct mscclppComm* comm;
  int rank, nranks, dev;
  pthread_mutex_t mu;          /* one call at a time on the host side */
  struct chan_ext* x;
  mscclppWaitInfo wait;        /* the kernel's own waits (barriers, semaphores, packets) */
  int64_t thread_bytes;        /* MSCCLPP_EXEC_GPU_THREAD_BYTES (run.c: threads per block of a call) */
  int op_tables;               /* MSCCLPP_EXEC_GPU_OP_TABLES (table.c) */
  struct xg_words* words;      /* device */
  struct xg_err* err_host;     /* host-mapped */
  struct xg_err* err_dev;
  int broken;                  /* a collective setup step failed: every call fails with broken_msg */
  char broken_msg[512];
  /* chans.c */
  mscclppConnection_t* conn;   /* [peer] */
  int *nmem, *nport;           /* [peer]: channels made */
  int32_t *mem_slot, *port_slot; /* [peer * XG_MAX_ORD + ord] */
  int nmsem, npch;
  mscclppMemoryDevSemaphore* msem_dev; /* [XG_MAX_SLOTS] */
  mscclppPortChannel* pch_host;        /* [XG_MAX_SLOTS] semaphore-only ports */
  mscclppPortChannel* pch_dev;
  int* pch_sem;                        /* [slot]: the proxy's semaphore id */
  mscclppProxyService_t proxy;
  int proxy_running;
  struct xg_port* ports;
  int nports, capports;
  /* scratch.c */
  char* scr;                   /* current scratch (size scr_cap) */
  uint64_t scr_cap;
  mscclppRegMem_t scr_reg;
  mscclppRegMem_t* scr_peer;   /* [peer]: current imports */
  char** scr_host;             /* [rank]: every rank's current scratch as mapped here */
  char** scr_dev;              /* device copy */
  int scr_gen;
  struct xg_scratch_old* old;  /* earlier scratches and imports, kept until teardown */
  struct ubuf_cache ub; /* users' buffers (core/ubuf.h) */
  /* ctx.c */
  struct xg_ctx** ctxs;
  int nctx, capctx;
  struct xg_ctx* last_ctx;
  /* image.c */
  struct xg_image* images[XG_MAX_IMAGES];
  int nimages, next_image;
  struct xg_image** retired; /* images pushed out of `images`: kept (graphs captured earlier may name them) */
  int nretired, capretired;
};

/* state.c */
mscclppResult_t xg_get(struct mscclppComm* comm, struct xg_state** out);
/* Swaps size bytes with peer under the executor's bootstrap tag `sub`. */
mscclppResult_t xg_swap(struct xg_state* st, int peer, int sub, const void* mine, void* theirs, size_t size);
/* Marks the state broken with the current last error (after a failed collective step). */
mscclppResult_t xg_break(struct xg_state* st, mscclppResult_t res);
/* A failure an earlier call recorded on the device (error record, device-error record, proxy). */
mscclppResult_t xg_check(struct xg_state* st);
/* Uploads bytes to device memory (synchronous). */
mscclppResult_t xg_upload(void* dst, const void* src, size_t bytes);
/* cudaMalloc'd, zeroed device memory. */
mscclppResult_t xg_dev_alloc(void** out, size_t bytes, const char* what);

/* chans.c: connections and channels for rank pr's plan (collective with the peers it names). */
struct plan_rank;
mscclppResult_t xg_chans_ensure(struct xg_state* st, const struct plan_rank* pr);
/* The proxy's port for (port channel slot, dst, src): made on first use. */
mscclppResult_t xg_port_get(struct xg_state* st, int slot, mscclppRegMem_t dst, mscclppRegMem_t src, uint32_t* id);
void xg_chans_fini(struct xg_state* st);

/* scratch.c: at least bytes of scratch on every rank (collective when it grows). */
mscclppResult_t xg_scratch_ensure(struct xg_state* st, uint64_t bytes);
void xg_scratch_fini(struct xg_state* st);

/* ctx.c: the context of this call's buffers (collective on a miss). */
mscclppResult_t xg_ctx_get(struct xg_state* st, const void* send, uint64_t sb, const void* recv, uint64_t rb,
                           void* stream, struct xg_ctx** out);
void xg_ctx_fini(struct xg_state* st);

/* image.c */
struct mscclppPlan;
struct plan_layout;
mscclppResult_t xg_image_get(struct xg_state* st, const struct mscclppPlan* plan, void* stream, struct xg_image** out);
/* Checks once per (sizes, element size), for every rank's ops, what the kernel would otherwise
 * find mid-call: pipelines that do not cover their ops, reductions over a partial element. */
mscclppResult_t xg_image_check_sizes(struct xg_image* img, const struct mscclppPlan* plan, const struct plan_layout* l,
                                     uint64_t esize);
void xg_images_fini(struct xg_state* st);

/* bind.c: for img's calls with ctx's buffers (at layout l), the device table of port ids of its port
 * puts (*ports; NULL without) and its op tables (*tab; NULL without: the kernel then works the
 * windows and addresses out itself). */
mscclppResult_t xg_bind_get(struct xg_state* st, struct xg_image* img, const struct mscclppPlan* plan,
                            const struct plan_layout* l, const struct xg_ctx* ctx, void* stream,
                            const uint32_t** ports, const char** tab);
void xg_bind_free(struct xg_image* img);

/* table.c: block bl's op table at out (xg_tab_bytes(nops, nrefs, halves) bytes) for a call on rank
 * `rank` whose buffers are io[q * 2 + t] (rank q's input t = 0, output t = 1) and scr[q] (NULL: no
 * scratch) at layout x; align: the tbg slices' alignment. Plain C (tests/unit/exec_table.c). */
struct xg_table_in {
  int rank;
  char* const* io;
  char* const* scr;
  const struct xg_layout* x;
  uint64_t align;
  int halves; /* 2 with double scratch */
};
struct plan_block;
void xg_table_fill(const struct xg_table_in* in, const struct plan_block* bl, char* out);
/* table.c: img's op tables for ctx's buffers at layout l and the current scratch (*out: device). */
mscclppResult_t xg_table_make(const struct xg_state* st, const struct xg_image* img, const struct mscclppPlan* plan,
                              const struct plan_layout* l, const struct xg_ctx* ctx, char** out);

#endif /* MPP_EXEC_GPU_STATE_H_ */
