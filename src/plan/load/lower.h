/* lower.h - what the loader's steps share while one plan is lowered: the rank's channel tables and
 * remote buffers from gpus[r], and the block being filled (load.c reads the plan, ops.c the ops). */
#ifndef MPP_PLAN_LOAD_LOWER_H_
#define MPP_PLAN_LOAD_LOWER_H_

#include "plan/load/json.h"
#include "plan/plan.h"

/* Limits checked by the prescan, before any tree is built (and again where the loader counts). */
#define PLAN_MAX_BLOCKS 65536       /* threadblocks of one gpu */
#define PLAN_MAX_BLOCK_OPS (1 << 20) /* ops of one list (a block's, or a pipeline's nested ops) */

/* One linear pass over the JSON text that allocates nothing: InvalidArgument naming the limit when
 * the plan has more JSON values than MSCCLPP_PLAN_MAX_VALUES, more than 1024 gpus, PLAN_MAX_BLOCKS
 * threadblocks in a gpu or PLAN_MAX_BLOCK_OPS ops in a list (prescan.c). */
mscclppResult_t plan_prescan(const char* s, size_t len, const char* name);

struct lw_chan { /* one entry of gpus[r].channels */
  int type;      /* enum plan_chan_type */
  int peer, ord; /* memory/port */
  int sw;        /* switch: index among the rank's switch channels */
};

struct lw_rbuf { /* one entry of gpus[r].remote_buffers */
  int rank, btype;
  unsigned access; /* bit per plan_chan_type */
};

struct lw_gpu {
  int rank, nranks;
  struct lw_chan* chans;
  int nchans;
  int count[4]; /* channels per type */
  struct lw_rbuf* rbufs;
  int nrbufs;
};

/* The block being lowered: block-local channel tables (local index -> index into gpu chans of
 * that type's order) and remote buffer refs per access type. */
struct lw_block {
  int* ch[4];
  int nch[4];
  int* rb[4];
  int nrb[4];
  /* growing output arrays */
  struct plan_op* ops;
  uint32_t nops, capops;
  struct plan_ref* refs;
  uint32_t nrefs, caprefs;
  struct plan_chanref* chans;
  uint32_t nchans, capchans;
};

extern const char* const plan_chan_names[4];
extern const char* const plan_buf_names[3];

/* Lowers tb["ops"] (and nested pipeline ops) into b. */
mscclppResult_t lw_ops(struct pj_where* w, const struct mscclppPlan* p, const struct plan_rank* pr,
                       const struct lw_gpu* g, const json_t* ops, struct lw_block* b, int depth);

/* gpus[r] pieces (load.c). */
mscclppResult_t load_channels(struct pj_where* w, const json_t* gj, struct lw_gpu* g, struct plan_rank* pr);
mscclppResult_t load_rbufs(struct pj_where* w, const json_t* gj, struct lw_gpu* g);
mscclppResult_t load_sems(struct pj_where* w, const json_t* gj, struct plan_rank* pr);

/* Barrier ids and semaphores of one rank (check_sync.c); fills pr->nbarriers/barrier_blocks. */
mscclppResult_t check_sync(struct mscclppPlan* p, struct pj_where* w, struct plan_rank* pr);

/* Checks that op (just lowered into b) has what its code needs: channels, sources and
 * destinations of the right kinds, scratch for packets, the protocol. */
mscclppResult_t lw_shape(struct pj_where* w, const struct mscclppPlan* p, const struct lw_block* b,
                         const struct plan_op* op);

#endif /* MPP_PLAN_LOAD_LOWER_H_ */
