/* gpu.h - the GPU ranks' collectives: per-communicator device state (scratch, memory channels to
 * every peer, the LL flag counter), the exchange plan every kernel runs, and the launchers.
 * Included by host C (setup.c, algos.c) and by the kernels (nvcc, C++): plain C only.
 *
 * Scratch layout (device memory of this rank, registered; peers write into it):
 *   [0, ll_bytes)           LL region: 2 parities x nranks inboxes of ll_slot bytes; inbox
 *                           (parity, from) holds the LL16 packets rank `from` sent in a launch with
 *                           that flag parity; its last packet is the sync packet (see ll.cu)
 *   [ll_bytes, +bulk_bytes) bulk region: 2 parities x nranks inboxes of bulk_slot bytes; inbox
 *                           (parity, from) holds step k (k mod 2 == parity) of rank `from`; block b
 *                           of a bulk kernel owns bytes [b * bulk_slot / nblocks, +bulk_slot / nblocks)
 *                           of every inbox (see bulk.cu)
 *   [meta_off, +nranks x EZC_DESC_BYTES) meta region: slot `from` holds rank from's descriptor of
 *                           the current staged call (struct ezc_desc, zc.cu)
 * Every rank uses the same geometry (the parameters must agree; checked when the channels are made). */
#ifndef MPP_ALGO_GPU_GPU_H_
#define MPP_ALGO_GPU_GPU_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/memory_channel.h>

#include "algo/algo.h"
#include "elem/redop.h"
#include "core/ubuf.h"

#define GPU_MAX_RANKS 8 /* one reduction takes every rank's part: at most ELEM_MAX_SRCS */
#if GPU_MAX_RANKS > ALGO_WIN_MAX_RANKS
#error "a window maps every GPU rank's buffer: raise ALGO_WIN_MAX_RANKS"
#endif
#if GPU_MAX_RANKS > ELEM_MAX_SRCS
#error "GPU_MAX_RANKS exceeds the sources one GPU reduction takes (ELEM_MAX_SRCS)"
#endif
#define GPU_LL_THREADS 512
#define GPU_BULK_THREADS 512

/* What a kernel needs of the communicator (device pointers; a copy lives in host memory). */
struct gpu_dev {
  mscclppMemoryChannel* chans; /* device array: chans[b * nranks + q], b < nblocks (q == rank: unused) */
  char* scratch;               /* this rank's scratch (device) */
  char* peer_scratch[GPU_MAX_RANKS]; /* rank q's scratch mapped here (q == rank: scratch): a kernel
                                      * parameter, so the LL kernel finds its peers' inboxes without
                                      * a global load per peer */
  uint32_t* flag;              /* device: the last LL flag used (LL launches add one) */
  uint32_t* done;              /* device: blocks of the current LL launch that finished */
  uint64_t ll_slot, ll_bytes;  /* LL inbox bytes (multiple of 16), LL region bytes */
  uint64_t bulk_slot;          /* bulk inbox bytes (multiple of 16 * nblocks) */
  int rank, nranks, nblocks;   /* nblocks: bulk kernel blocks = channels per peer */
  int ll_blocks;               /* LL kernel blocks */
  int bulk_min_steps;          /* a bulk launch cuts its parts into at least this many steps */
};

/* How one launch moves data: rank q gets bytes [send_off[q], +send_len[q]) of src (send_len 0:
 * nothing; q == rank: this rank's own part). What arrives from q goes to dst + recv_off[q]
 * (GX_COPY; q == rank: the own part is copied from src unless it is already there), or every
 * rank's part, in rank order, reduces into dst + red_off (GX_REDUCE: all recv_len equal; the own
 * part is src + send_off[rank]). premul: parts sent are scaled by scalar first (and the own part
 * when reduced). */
enum gx_mode { GX_NONE = 0, GX_COPY = 1, GX_REDUCE = 2 };
struct gx_plan {
  const char* src;
  char* dst;
  uint64_t send_off[GPU_MAX_RANKS], send_len[GPU_MAX_RANKS];
  uint64_t recv_off[GPU_MAX_RANKS], recv_len[GPU_MAX_RANKS];
  uint64_t red_off;
  uint64_t maxlen; /* the largest send_len/recv_len of any rank in this launch (same on every rank) */
  elem_scalar scalar;
  const void* scalar_dev; /* non-NULL: the scalar is a value of dtype here, read by the kernel */
  int mode;        /* enum gx_mode */
  int dtype, op;   /* op: enum elem_op (reductions; premul scales on send) */
  int scale_send;  /* 1: premul, scale parts before sending */
  int p2p;         /* 1 (bulk only): only pairs with pair_len[q] > 0 take part, each for its own steps */
  uint64_t pair_len[GPU_MAX_RANKS]; /* p2p: max(send_len[q], recv_len[q]), equal on both sides of a pair */
  uint64_t step_cb; /* bulk: bytes per block and step (set by gpu_launch_bulk from maxlen; <= bulk_slot / nblocks) */
  int one_src, one_dst; /* staged / zero-copy kernels only (gpu_plan_rooted): 1 when only rank root's
                           input (broadcast) or output (reduce) exists; each rank then moves its slice */
  int root;
  int ring; /* reduce (one_dst, root-alone slices): the zero-copy kernel runs it as a ring (gx_zc.ring_sub) */
  const uint32_t* skip; /* device word or NULL: when nonzero the launch does nothing (the probe of an
                           eager call larger than the stage went zero copy: stage.c) */
};

/* A zero-copy launch (zc.cu): every rank's own buffers of one captured call, as mapped here, so
 * the kernel reads peers' inputs and writes peers' outputs directly (no inbox). With a gx_plan:
 *   GX_COPY    part q (send_off[q], send_len[q]) of src goes to rank q's output at recv_off[rank]
 *   GX_REDUCE  every rank's input at send_off[rank] (recv_len[rank] bytes) reduces, in rank order,
 *              into dst + red_off, and with put_reduced also into every peer's output there */
/* Eager zero copy (ezc.c): a staged call goes zero copy when every rank's buffers of the call are
 * mapped on every peer. Each rank announces each allocation it passes to a staged call once
 * (announcement sequence number aseq = 1, 2, ...: the allocation's row in the peers' tables); a
 * peer imports announcements in order at its next call and records the mapping at row aseq of its
 * device table before the kernel that may use it (stream order). The kernel learns every rank's
 * descriptor in the opening round and goes zero copy when every rank has seen every peer's
 * announcements the call names; all ranks compute that from the same descriptors, so all agree. */
#define EZC_SLOTS 4096 /* announcements per rank a peer keeps (later allocations stay staged) */
struct ezc_entry {
  char* base; /* the announced allocation as mapped here */
  uint64_t size;
};
/* What a rank writes into every peer's meta region (at its rank's slot) before the opening round. */
struct ezc_desc {
  uint64_t in_aseq, out_aseq;         /* the allocations holding this call's input and output */
  uint64_t in_off, out_off;           /* the buffers' offsets in them */
  uint64_t seen[GPU_MAX_RANKS];       /* rank q's announcements imported here, in order (1..seen[q]) */
  uint64_t usable;                    /* 0: this rank cannot go zero copy (the whole call stays staged) */
  uint64_t pad[3];
};
#define EZC_DESC_BYTES 128 /* sizeof(struct ezc_desc), the meta region's slot per rank */

struct gx_zc {
  const char* peer_src[GPU_MAX_RANKS]; /* rank q's input (q == rank: the call's own) */
  char* peer_dst[GPU_MAX_RANKS];       /* rank q's output */
  uint64_t chunk;                      /* bytes of each part per block, a multiple of 16 */
  int put_reduced;
  int two_pass; /* reductions into the own output (allreduce, reducescatter): 0: each unit reduced and
                   written to every output at once; 1: the slice reduced into the own output from
                   every input at once, then put from there (put_reduced); 2: the same, the inputs
                   read one peer at a time */
  uint64_t chain_sub; /* eager zero-copy broadcast on the root-free plan: bytes per step of the push
                         chain (zc_bcast_chain); 0: every rank copies its slice from the root's input */
  uint64_t ring_sub;   /* reduce as a ring (plan.ring): bytes per step of a block's range */
  uint64_t ring_slots; /* the ring slots of ring_sub bytes a block has in each rank's bulk region */
  int open_relaxed; /* zero copy over the users' buffers (not staged): the opening round is relaxed
                       (MSCCLPP_ALGO_GPU_ZC_OPEN_RELAXED; round.cuh gx_round) */
  int staged; /* 1: a staged call (stage.c): peer_src / peer_dst of the peers are their stages */
  int ezc;    /* staged and eager: zero copy when every rank's descriptor allows (ezc.c) */
  const struct ezc_entry* table; /* ezc: device, table[q * EZC_SLOTS + aseq - 1] */
  uint32_t* hits;                /* ezc: device counter of the launches that went zero copy */
  uint32_t* went;                /* ezc probe (a call larger than the stage) or NULL: 1 or 0 written here
                                    as it went zero copy or not; a miss runs no staged body (the
                                    launches after it, with plan.skip = went, do the call) */
  struct ezc_desc me;            /* ezc: this rank's descriptor */
};

/* Host side of eager zero copy (ezc.c). */
struct ezc_state {
  struct ezc_entry* table;        /* device, nranks x EZC_SLOTS, zeroed */
  uint32_t* hits;                 /* device word */
  uint32_t* went;                 /* device word: the last probe's outcome (gx_zc.went) */
  uint64_t seen[GPU_MAX_RANKS];   /* announcements of rank q imported here */
  uint64_t announced;             /* this rank's announcements so far */
  int stuck[GPU_MAX_RANKS];       /* an announcement of q failed here: q's later ones are ignored */
  int full_logged;
  uint64_t calls, prep_ns, drain_ns; /* eager staged launches, the host time their preparation took,
                                        * and the part of it spent taking announcements */
  uint64_t launch_ns;                  /* host time of those launches, preparation included */
};

struct gpu_net {
  struct gpu_dev d;
  struct ubuf_cache ub; /* the users' buffers of zero-copy calls (zc.c, ezc.c) */
  struct ezc_state ez;
  uint64_t graph_launches; /* zero-copy and staged calls launched (tests check the calls took them) */
  mscclppConnection_t conn[GPU_MAX_RANKS];
  mscclppRegMem_t scratch_reg;
  mscclppRegMem_t peer_scratch[GPU_MAX_RANKS];
  mscclppMemoryChannel* hchans; /* host copy of d.chans */
  int dev;
  int broken; /* setup failed once: every later call fails with the same message */
};

#ifdef __cplusplus
extern "C" {
#endif

struct algo_comm;
struct algo_args;

/* The GPU state of ac, made on the first call (collective over the communicator: every rank's
 * first GPU collective makes it). Refused while the stream is being captured into a graph. */
mscclppResult_t gpu_net_get(struct algo_comm* ac, void* stream, struct gpu_net** out);
/* Maps every peer's buffer of window w into w->peer (collective: every rank registers its window
 * together; mscclppCommWindowRegister has checked the sizes agree). */
mscclppResult_t gpu_win_map(struct algo_comm* ac, struct algo_win* w);
/* Releases the state (kernels using it must have finished). */
void gpu_net_free(struct gpu_net* g);

/* Launches one LL exchange (all-pairs, flags) or one bulk exchange (steps of put + signal + wait)
 * on stream. InvalidUsage / InternalError with the CUDA error text. */
mscclppResult_t gpu_launch_ll(const struct gpu_dev* d, const struct gx_plan* p, void* stream);
mscclppResult_t gpu_launch_bulk(const struct gpu_dev* d, const struct gx_plan* p, void* stream);
/* Launches one zero-copy exchange: a round with every peer, the data, a closing round. */
mscclppResult_t gpu_launch_zc(const struct gpu_dev* d, const struct gx_plan* p, const struct gx_zc* z, void* stream);
/* dst = src (bytes of device memory) on stream: a one-rank collective (coll/dispatch.c). */
mscclppResult_t gpu_copy_local(void* dst, const void* src, size_t bytes, void* stream);
/* 1 when stream is being captured into a CUDA graph (0 without CUDA or on error). */
int gpu_stream_captured(void* stream);
/* Success for cudaSuccess, else InternalError "GPU collectives: <what> failed: <CUDA's text>". */
mscclppResult_t gpu_cuda_check(int err, const char* what);
/* Load every LL / bulk kernel instantiation now (at setup: see GxPick::preload in elem.cuh). */
mscclppResult_t gpu_preload_ll(void);
mscclppResult_t gpu_preload_bulk(void);
mscclppResult_t gpu_preload_zc(void);

/* Blocks of GPU_BULK_THREADS threads that one SM of the current device keeps resident at once
 * (setup compares them with nblocks): the bulk copy kernel's (the reducing bulk kernels keep one
 * by choice, bulk.cu), and the fewest of any zero-copy instantiation. */
mscclppResult_t gpu_resident_bulk(int* per_sm);
mscclppResult_t gpu_resident_zc(int* per_sm);

/* GPU ranks on several hosts (xhost.cu, used by xhost_algos.c): dst[i] = srcs[0][i] op ... op
 * srcs[nsrc-1][i] in source order, then / divide when divide > 0 (avg); sources in device or
 * host-mapped pinned memory, dst may be one of them. op: sum, prod, max or min. */
#define XH_MAX_SRCS 16
mscclppResult_t xh_reduce_launch(void* dst, const void* const* srcs, int nsrc, size_t count, int dtype, int op,
                                 int divide, void* stream);
mscclppResult_t xh_preload(void);
/* Largest part one LL launch can carry per peer. */
static inline uint64_t gpu_ll_max(const struct gpu_dev* d) { return d->ll_slot / 2 - 16; }

/* The algorithms (algos.c). */
/* Call a by its bulk sibling (gpu_bulk_of), each launch doing nothing when *skip is nonzero on the
 * device (skip NULL: never). */
mscclppResult_t gpu_bulk_skippable(struct algo_comm* ac, const struct algo_args* a, const uint32_t* skip);
mscclppResult_t gpu_allreduce_ll1(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_allreduce_ll2(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_allreduce_bulk(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_allreduce_bulk1(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_allgather_ll(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_allgather_bulk(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_reducescatter_ll(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_reducescatter_bulk(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_broadcast_ll(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_broadcast_bulk(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_reduce_ll(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_reduce_bulk(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_alltoall_ll(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_alltoall_bulk(struct algo_comm* ac, const struct algo_args* a);
/* The bulk algorithm of a collective (the graph-only families' fallback outside capture). */
algo_run_fn gpu_bulk_of(enum algo_coll coll);
/* The graph-only family, one entry each for allreduce, allgather, reducescatter, alltoall,
 * broadcast and reduce (registry rows gpu_<collective>_zc): zero copy (zc.c), for calls captured
 * into a CUDA graph (or, but for broadcast and reduce, on registered windows or buffers); others
 * run the collective's bulk algorithm. */
mscclppResult_t gpu_coll_zc(struct algo_comm* ac, const struct algo_args* a);
/* The staged family (stage.c; rows gpu_<collective>_stage): the zero-copy kernel over the peers'
 * scratch, any call (eager or captured, any buffers): the parts peers read are staged in the own
 * scratch first and the parts peers write are copied out of it after. */
mscclppResult_t gpu_coll_stage(struct algo_comm* ac, const struct algo_args* a);
/* The start of the graph-only algorithm (zc.c): *go = 1 when it runs call a itself, with
 * *g the GPU state, z every rank's buffers as mapped here and p the call's exchange plans
 * (gpu_plans, two-phase for allreduce; gpu_plan_rooted for broadcast and reduce, split by
 * gpu_rooted_split) (for captured calls or calls on registered windows,
 * non-empty and no premulsum reduction; captured calls off windows swap their buffers'
 * registrations with every peer: a collective step); *go = 0 when the bulk sibling runs it instead (also when some rank's call is
 * an in-place alltoall, agreed in the swap). */
/* Fills z's eager zero-copy fields for staged call a (not captured): imports the peers' new
 * announcements (their table rows enqueued on a->stream) and announces this call's allocations on
 * a miss. Failures to register or import only keep calls staged; a failed send is an error. */
mscclppResult_t gpu_ezc_prepare(struct gpu_net* g, struct algo_comm* ac, const struct algo_args* a, struct gx_zc* z);
/* Logs (INFO) how many eager staged launches went zero copy and what preparing them cost (at
 * teardown, after the device is synchronized). */
void gpu_ezc_report(struct gpu_net* g);
/* Staged launches that went zero copy on this rank so far (synchronizes the device; for tests). */
uint64_t gpu_ezc_hits(struct gpu_net* g);
/* Bytes of call a's input and output on nranks ranks. */
void gpu_in_out_bytes(int nranks, const struct algo_args* a, uint64_t* in, uint64_t* out);
/* Offset of the meta region (nranks descriptor slots of EZC_DESC_BYTES) in a rank's scratch. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t gpu_meta_off(const struct gpu_dev* d) {
  return d->ll_bytes + 2ull * (uint64_t)d->nranks * d->bulk_slot;
}
/* Bytes per block of a zero-copy or staged launch whose largest part is maxlen: at least
 * MSCCLPP_ALGO_GPU_ZC_CHUNK, more so that at most nblocks blocks cover the part; a multiple of 16. */
uint64_t gpu_zc_chunk(const struct gpu_net* g, uint64_t maxlen);
/* z's chunk for plan p, two_pass for a reduction into the own output whose parts reach
 * MSCCLPP_ALGO_GPU_ZC_TWO_PASS_MIN bytes (MSCCLPP_ALGO_GPU_ZC_STAGGER: staggered) and the step of a
 * broadcast's push chain; the same on every rank (maxlen and the parameters are). */
void gpu_zc_shape(const struct gpu_net* g, const struct gx_plan* p, struct gx_zc* z);
/* Whether an eager broadcast that may go zero copy takes the root-free plan and the push chain
 * (3+ ranks, MSCCLPP_ALGO_GPU_BCAST_CHAIN > 0 from MSCCLPP_ALGO_GPU_BCAST_CHAIN_MIN bytes, eager zero
 * copy on); the same on every rank. */
int gpu_bcast_chain(const struct algo_args* a, int nranks);
mscclppResult_t gpu_graph_only_begin(struct algo_comm* ac, const struct algo_args* a, struct gpu_net** g,
                                     struct gx_zc* z, struct gx_plan p[2], int* go);
/* The plans of collective a on rank `rank` of nranks (1, or 2 for a two-phase allreduce: reduce-
 * scatter, then allgather); pure, for the run functions and the CPU-side plan test. */
int gpu_plans(const struct algo_args* a, int rank, int nranks, int two_phase, struct gx_plan out[2]);
/* How a rooted plan (broadcast, reduce) splits the message among the ranks. */
enum gpu_rooted_split {
  GPU_ROOTED_EVEN,       /* rank q moves its slice of n */
  GPU_ROOTED_ROOT_FREE,  /* the n - 1 ranks after the root share it, the root moves none (n > 1) */
  GPU_ROOTED_ROOT_ALONE, /* the root moves all of it, the others nothing */
  GPU_ROOTED_RING,       /* reduce: the root-alone slices, run as a ring by the zero-copy kernel */
};
/* The staged plan of a broadcast or reduce (GX_REDUCE over slices, one_src / one_dst): rank q
 * moves its slice of the message (split): from the root's input into every rank's output
 * (broadcast), or reduced from every rank's input into the root's output (reduce). */
void gpu_plan_rooted(const struct algo_args* a, int rank, int nranks, enum gpu_rooted_split split, struct gx_plan* out);
#define GPU_ROOT_FREE_MIN (64ull << 20) /* bytes: see gpu_rooted_split */
/* The split of call a's rooted plan on nranks ranks (chain: the broadcast runs as the push chain,
 * which needs the root-free split; ring: the call goes zero copy, so a reduce may run as a ring,
 * gpu_reduce_ring); the same on every rank.
 * Root-free for a reduce on 3+ ranks from GPU_ROOT_FREE_MIN bytes: the root's links then carry the
 * message once each way instead of 1.5 times out (4x H100, eager, float sum, us, root with /
 * without a slice: reduce 34.8 / 43.8 at 4M, 94.2 / 96.1 at 16M, 316 / 277 at 64M, 1199 / 1037 at
 * 256M; broadcast 38.0 / 38.3, 95.1 / 95.2, 312 / 405, 1157 / 1592; on 2 ranks at 256M: reduce
 * 814 / 893, broadcast 760 / 840).
 * Root alone on 2 ranks from MSCCLPP_ALGO_GPU_ROOT_ALONE_MIN bytes: the link then carries one
 * direction's traffic, a broadcast's root writing, a reduce's root reading (2x H200, us, halves /
 * root alone, eager: broadcast 61.4 / 57.8 at 16M, 759 / 751 at 256M, reduce 61.9 / 59.7, 818 /
 * 751; captured: broadcast 56.6 / 53.1, 742 / 734, reduce 56.4 / 54.5, 800 / 734; at 1M the halves
 * win, 8.8 / 10.3 and 9.4 / 11.5 captured). */
enum gpu_rooted_split gpu_rooted_split(const struct algo_args* a, int nranks, int chain, int ring);
/* Whether reduce a may run as a ring when it goes zero copy: 3+ ranks, from
 * MSCCLPP_ALGO_GPU_REDUCE_RING_MIN bytes, not avg (the partial sums cannot divide) nor
 * pre-multiplied; the same on every rank. The ring moves every byte over each link once, as writes
 * (each rank adds its input to its predecessor's partial and puts the sum into its successor's
 * bulk region; the root adds its input into its output), where the root-free plan reads. */
int gpu_reduce_ring(const struct algo_args* a, int nranks);
#define GPU_CHAIN_MIN_STEP 2048 /* bytes: the smallest step of a broadcast's push chain */
/* A group's sends and receives on GPU ranks (p2p.c). */
struct p2p_op;
mscclppResult_t gpu_p2p_run(struct p2p_op* ops, int nops);

#ifdef __cplusplus
}
#endif

#endif /* MPP_ALGO_GPU_GPU_H_ */
