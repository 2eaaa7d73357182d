/* plan.h - the lowered form of an execution plan (what load.c makes from JSON and the executors
 * run), and the per-message-size layout (sizes.c).
 *
 * Lowered form: per rank, per threadblock, one flat array of ops; a pipeline op is followed by its
 * nested ops (op.nested of them). Buffer references and channel references of all ops of a block
 * live in two flat per-block arrays the ops index (first_ref, first_chan). Offsets are 64-bit.
 * Every index in here was checked at load time (check.c): executors trust it. */
#ifndef MPP_PLAN_PLAN_H_
#define MPP_PLAN_PLAN_H_

#include <pthread.h>
#include <stdint.h>

#include <mscclpp/executor.h>

enum plan_buf { PLAN_BUF_IN = 0, PLAN_BUF_OUT = 1, PLAN_BUF_SCR = 2 };
enum plan_chan_type { PLAN_CH_NONE = 0, PLAN_CH_MEMORY = 1, PLAN_CH_PORT = 2, PLAN_CH_SWITCH = 3 };
enum plan_ref_kind { PLAN_REF_LOCAL = 0, PLAN_REF_REMOTE = 1, PLAN_REF_SWITCH = 2 };

#define PLAN_OPS(X)                                                                                        \
  X(NOP, "nop") X(BARRIER, "barrier") X(PUT, "put") X(PWS, "pws") X(PWSF, "pwsf") X(GET, "get")           \
  X(COPY, "copy") X(SIGNAL, "signal") X(WAIT, "wait") X(RLXSIGNAL, "rlxsignal") X(RLXWAIT, "rlxwait")       \
  X(FLUSH, "flush") X(RE, "re") X(RES, "res") X(RRE, "rre") X(RRES, "rres") X(PPKT, "ppkt")                 \
  X(RPPKT, "rppkt") X(CPKT, "cpkt") X(UPKT, "upkt") X(REPKT, "repkt") X(RESPKT, "respkt")                   \
  X(RECPKT, "recpkt") X(RECSPKT, "recspkt") X(GLRE, "glre") X(GLRES, "glres") X(GSTORE, "gstore")           \
  X(GSTOREPKT, "gstorepkt") X(PIPELINE, "pipeline") X(SEM_ACQUIRE, "sem_acquire")                          \
  X(SEM_RELEASE, "sem_release")
#define PLAN_OP_ENUM(e, s) PLAN_OP_##e,
enum plan_op_code { PLAN_OPS(PLAN_OP_ENUM) };
#undef PLAN_OP_ENUM
/* How many op codes there are: a constant, not an enumerator, so that a switch over the enum that
 * lists every op is complete for -Wswitch-enum (docs/plans.md: where a new op goes). */
#define PLAN_OP_ONE(e, s) +1
#define PLAN_OP_COUNT (0 PLAN_OPS(PLAN_OP_ONE))

/* A buffer reference: chunks [index, index+size) of a buffer. LOCAL: this rank's buffer btype;
 * REMOTE: rank `rank`'s buffer btype (from the block's remote_buffer_refs); SWITCH: the switch
 * channel `sw` (index into the rank's switch channels) and its buffer type. */
struct plan_ref {
  uint8_t kind, btype;
  int16_t rank;
  int32_t sw;
  uint32_t index, size;
};

/* A channel as an op uses it: the peer, and which of the channels of this type between this rank
 * and the peer it is (ordinal, in the order of gpus[r].channels), which pairs it with the peer's
 * channel of the same ordinal. For switch channels: peer = -1, ord = index of the switch channel.
 * For sem_acquire/sem_release: ord = semaphore id. */
struct plan_chanref {
  int32_t peer, ord;
};

struct plan_op {
  uint8_t code, chan_type, redop, pad;
  uint16_t nsrc, ndst;   /* refs[first_ref .. +nsrc) are sources, then ndst destinations */
  uint16_t nchan;        /* chans[first_chan .. +nchan) */
  uint16_t tbg_id, tbg_size; /* tbg_size 0 or 1: the whole range */
  uint32_t first_ref, first_chan;
  int32_t barrier_id, barrier_blocks;
  uint32_t nested;       /* pipeline: how many ops follow that belong to it */
  uint64_t unit_size;    /* pipeline */
  uint32_t num_chunks;   /* pipeline */
};

struct plan_block {
  int id;
  uint32_t nops, nrefs, nchans;
  struct plan_op* ops;
  struct plan_ref* refs;
  struct plan_chanref* chans;
};

struct plan_switch {
  uint8_t btype;
  int nranks;
  int* ranks; /* the group this rank belongs to (this rank included) */
};

struct plan_rank {
  uint32_t in_chunks, out_chunks, scr_chunks;
  int nblocks;
  struct plan_block* blocks;
  int nsems;
  int64_t* sem_init;
  int nbarriers;          /* barrier ids are 0 .. nbarriers-1 */
  int* barrier_blocks;    /* blocks that meet at each barrier id */
  int nswitch;
  struct plan_switch* sw;
  int* pair_count;        /* [peer * 4 + type]: channels of that type to that peer */
  int max_ord;            /* largest channel ordinal + 1 over peers and types */
};

/* Per-size layout (see plan-format.md, Sizes; docs/plans.md spells out our rule). */
struct plan_layout {
  uint64_t in_bytes, out_bytes;  /* the sizes it was made for */
  uint64_t period;               /* B: bytes of one group of C chunks */
  uint64_t slot;                 /* bytes of one scratch chunk */
  uint32_t chunks;               /* C */
  uint64_t align_unit;           /* buffer_alignment */
  uint64_t unit_base;            /* bytes of a base chunk */
  uint32_t extra;                /* the first `extra` chunks of a group have one alignment unit more */
  uint64_t scr_bytes;            /* scratch bytes (data-equivalent; x2 for LL, x2 for double) */
  uint64_t chunk_max;            /* longest chunk */
  uint64_t scr_stride;           /* bytes of scratch one launch uses (x2 for LL) */
};

#define PLAN_LAYOUT_CACHE 8

struct mscclppPlan {
  uint64_t id; /* unique in the process (executors key their per-plan state by it) */
  char* name;
  char* file;
  char* collective;
  int nranks;
  int ll, inplace, reuse, double_scratch;
  int double_by_check; /* double_scratch turned on at load by the order check */
  uint32_t align;
  uint32_t threads_per_block;
  uint64_t min_size, max_size;
  struct plan_rank* ranks;
  /* Layouts by (in_bytes, out_bytes), filled on first use; guarded by cache_lock. */
  pthread_mutex_t cache_lock;
  struct plan_layout cache[PLAN_LAYOUT_CACHE];
  int ncache, cache_next;
};

const char* plan_op_name(int code);
/* Lowers JSON text into *out; every error names the plan, line/column or gpu/tb/op and the field. */
mscclppResult_t plan_parse(const char* json, size_t len, const char* name, struct mscclppPlan** out);
/* Cross-rank checks on a parsed plan (remote buffers, channel pairing, signal/wait balance). */
mscclppResult_t plan_check(const struct mscclppPlan* p);
void plan_free(struct mscclppPlan* p);

/* The layout for these sizes (cached; computed on a miss). Fails when the sizes cannot hold the
 * plan's input/output chunks. */
mscclppResult_t plan_layout_get(struct mscclppPlan* p, uint64_t in_bytes, uint64_t out_bytes,
                                struct plan_layout* out);
/* Byte offset of chunk k of a buffer of type btype (data-equivalent for packets). */
uint64_t plan_chunk_off(const struct plan_layout* l, int btype, uint64_t k);
/* Bytes op moves at this layout (sizes.c explains the rule). */
uint64_t plan_op_len(const struct plan_layout* l, const struct plan_ref* refs, const struct plan_op* op);
/* Byte extent needed for nchunks chunks of buffer type btype. */
static inline uint64_t plan_extent(const struct plan_layout* l, int btype, uint64_t nchunks) {
  return plan_chunk_off(l, btype, nchunks);
}

#endif /* MPP_PLAN_PLAN_H_ */
