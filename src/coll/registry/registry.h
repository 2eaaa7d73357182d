/* registry.h - the process-wide plan registry behind mscclppPlanRegister* (executor.h): its entries
 * (coll/registry/entry.c, coll/registry/xml.c), the registry itself with its published snapshot
 * (registry.c), the matching rules (coll/registry/match.c), the environment sources (coll/registry/env.c)
 * and the hook the collectives' dispatch point calls first (coll/registry/call.c).
 *
 * Readers (collective calls) never lock: they load the current snapshot, an immutable array of
 * entry pointers sorted by collective, then priority, then registration order. Every change builds
 * a new snapshot under the registry's mutex and publishes it; old snapshots are kept until
 * mscclppPlanRegistryClear (a call in flight may still read one). */
#ifndef MPP_COLL_REGISTRY_REGISTRY_H_
#define MPP_COLL_REGISTRY_REGISTRY_H_

#include <stdatomic.h>
#include <stdint.h>

#include <mscclpp/executor.h>

#include "algo/algo.h"
#include "plan/xml/xml.h"

#define PLANREG_MAX 256 /* registrations at once */
#define PLANREG_NOPS 4  /* reduce operators a plan can name: sum, prod, max, min (enum elem_op order) */

enum planreg_rule { PLANREG_RULE_PLAN = 0, PLANREG_RULE_MSCCL = 1 };

struct planreg_entry {
  int id;             /* > 0, set when registered */
  uint64_t seq;       /* registration order */
  int priority;
  int rule;           /* enum planreg_rule */
  int coll;           /* enum algo_coll it can serve, or -1: none (custom, test, sendrecv, reduce, ...) */
  int nranks, rpn, root, inplace; /* rpn 0: any */
  uint64_t min_bytes, max_bytes;  /* rule PLAN: inclusive range of the call's bytes */
  unsigned redops;    /* rule PLAN: bit k set when a reduce op of the plan uses operator k */
  struct xml_algo xml; /* rule MSCCL: the header fields MSCCL's rule reads (gpus is NULL) */
  mscclppPlan_t plan[PLANREG_NOPS]; /* rule PLAN: plan[0]. MSCCL: one per operator for allreduce and
                                       reducescatter, else plan[0] only */
  char* source;       /* the file, or "(memory)" */
  _Atomic uint64_t uses;
};

/* One collective call as the rules see it. */
struct planreg_query {
  int coll;          /* enum algo_coll */
  size_t count, es, bytes; /* count as the API takes it; bytes: the larger of input and output */
  int dtype;
  int op;            /* enum elem_op of a reduction, -1 otherwise */
  int user_op;       /* mscclppRedOp_t as passed (reductions), -1 otherwise */
  int root;          /* broadcast, else -1 */
  int nranks, rpn, rank, inplace;
};

/* ---- entries (coll/registry/entry.c, coll/registry/xml.c) ----------------------------------------------- */

/* An entry for a loaded plan (not copied; the entry owns it once registered). opts may be NULL;
 * file_rpn / file_root: the file's ranks_per_node / root fields, 0 / -1 when absent. */
mscclppResult_t planreg_entry_from_plan(mscclppPlan_t plan, const mscclppPlanRegOptions_t* opts, const char* source,
                                        int file_rpn, int file_root, struct planreg_entry** out);
/* An entry for a JSON plan file: read, validated, its ranks_per_node and root fields read. */
mscclppResult_t planreg_entry_from_file(const char* path, const mscclppPlanRegOptions_t* opts,
                                        struct planreg_entry** out);
/* An entry for an MSCCL XML file: parsed, checked, converted (one plan per reduce operator for
 * reductions). */
mscclppResult_t planreg_entry_from_xml(const char* path, const mscclppPlanRegOptions_t* opts,
                                       struct planreg_entry** out);
/* Frees an entry and its plans (not registered, or just removed). NULL is fine. */
void planreg_entry_free(struct planreg_entry* e);
/* Checks options (NULL is fine). */
mscclppResult_t planreg_check_options(const char* what, const mscclppPlanRegOptions_t* opts);
/* enum algo_coll for a collective name, or -1 when no collective call can use it. */
int planreg_coll_of(const char* name);

/* ---- the registry (registry.c) ---------------------------------------------------------------- */

struct planreg_snap {
  mscclppPlanSelector_t selector;
  void* user;
  int start[ALGO_COLL_COUNT], count[ALGO_COLL_COUNT]; /* entries of each collective in e[] */
  struct planreg_snap* older; /* retired snapshots, freed by mscclppPlanRegistryClear */
  int n;
  struct planreg_entry* e[];
};

/* Registers es[0..n) at once, or none of them (then the caller still owns them). ids (may be NULL)
 * get their ids. Fails when the registry would hold more than PLANREG_MAX or a plan is already
 * registered. */
mscclppResult_t planreg_add(struct planreg_entry** es, int n, int* ids);
/* Removes and frees every entry whose id is in ids[0..n) (unknown ids are skipped); *removed (may
 * be NULL) gets how many. */
mscclppResult_t planreg_remove_ids(const int* ids, int n, int* removed);
/* Removes and frees every entry and every snapshot, and forgets the selector. No collective may run. */
void planreg_clear(void);
/* Installs the selector (NULL: the first candidate). */
mscclppResult_t planreg_set_selector(mscclppPlanSelector_t selector, void* user);
/* Ids in selection order (up to max into ids); returns how many entries there are. */
int planreg_list(int* ids, int max);
/* Fills info for registration id; returns 0 when there is none. */
int planreg_info(int id, mscclppPlanEntryInfo_t* info);
/* The current snapshot, or NULL when nothing was ever registered. Lock-free. */
const struct planreg_snap* planreg_snapshot(void);

/* ---- matching (coll/registry/match.c) -------------------------------------------------------------- */

/* Whether e serves q by e's rule. */
int planreg_serves(const struct planreg_entry* e, const struct planreg_query* q);
/* The plan of e that runs q (MSCCL entries: the variant of q's operator). */
mscclppPlan_t planreg_plan_for(const struct planreg_entry* e, const struct planreg_query* q);
/* Picks among e[0..n) (selection order) for q: *out gets the first that serves, or the selector's
 * choice among those that serve (selector may be NULL), or NULL for the built-in algorithms. A
 * selector's out-of-range answer is InvalidUsage naming it. */
mscclppResult_t planreg_pick(struct planreg_entry* const* e, int n, const struct planreg_query* q,
                             mscclppPlanSelector_t selector, void* user, struct planreg_entry** out);

/* ---- environment (coll/registry/env.c) ------------------------------------------------------------- */

/* Loads MSCCLPP_PLAN_DIR and MSCCL_XML_FILES once per process (cheap after the first call) and
 * returns that load's result (a failure again with its message). */
mscclppResult_t planreg_env_ensure(void);
/* Marks the environment as loaded without reading it, and forgets a failed load (Clear). */
void planreg_env_reset_done(void);

/* ---- the collectives' hook (coll/registry/call.c) -------------------------------------------------- */

/* Runs a checked collective with a registered plan when one serves it (*done = 1), else leaves
 * *done = 0 for the built-in algorithms. Errors of the plan's execution are returned as they are. */
mscclppResult_t planreg_dispatch(struct algo_comm* ac, const struct algo_args* a, int* done);

#endif /* MPP_COLL_REGISTRY_REGISTRY_H_ */
