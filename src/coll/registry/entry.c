/* entry.c - registry entries for JSON plans: what a plan serves (collective, ranks,
 * in-place-ness, size range, reduce operators) and the registration's constraints (priority, ranks
 * per node, broadcast root), from the options or the plan file's optional "ranks_per_node" and
 * "root" fields (our extension: the loader ignores unknown top-level fields). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "plan/plan.h"
#include "coll/registry/registry.h"
#include "util/err.h"

#define PLAN_FILE_MAX (256u << 20)

int planreg_coll_of(const char* name) {
  static const enum algo_coll served[] = {ALGO_COLL_ALLREDUCE, ALGO_COLL_ALLGATHER, ALGO_COLL_REDUCESCATTER,
                                          ALGO_COLL_ALLTOALL, ALGO_COLL_BROADCAST};
  for (size_t i = 0; name && i < sizeof(served) / sizeof(served[0]); i++)
    if (strcmp(name, algo_coll_name(served[i])) == 0) return (int)served[i];
  return -1;
}

mscclppResult_t planreg_check_options(const char* what, const mscclppPlanRegOptions_t* o) {
  if (o == NULL) return mscclppSuccess;
  MPP_CHECK_ARG(o->ranksPerNode >= 0 && o->ranksPerNode <= XML_MAX_GPUS,
                "%s: options.ranksPerNode %d is not 0 (any) or 1..%d", what, o->ranksPerNode, XML_MAX_GPUS);
  MPP_CHECK_ARG(o->root >= -1, "%s: options.root %d is not -1 (the plan's) or a rank", what, o->root);
  return mscclppSuccess;
}

/* Bit k set when a reduce op of the plan uses operator k (sum, prod, max, min). */
static unsigned redop_mask(const struct mscclppPlan* p) {
  unsigned mask = 0;
  for (int r = 0; r < p->nranks; r++)
    for (int b = 0; b < p->ranks[r].nblocks; b++) {
      const struct plan_block* blk = &p->ranks[r].blocks[b];
      for (uint32_t i = 0; i < blk->nops; i++) {
        switch (blk->ops[i].code) {
          case PLAN_OP_RE: case PLAN_OP_RES: case PLAN_OP_RRE: case PLAN_OP_RRES: case PLAN_OP_REPKT:
          case PLAN_OP_RESPKT: case PLAN_OP_RECPKT: case PLAN_OP_RECSPKT: case PLAN_OP_GLRE: case PLAN_OP_GLRES:
            mask |= 1u << blk->ops[i].redop;
            break;
          default:
            break;
        }
      }
    }
  return mask;
}

void planreg_entry_free(struct planreg_entry* e) {
  if (e == NULL) return;
  for (int k = 0; k < PLANREG_NOPS; k++) plan_free(e->plan[k]);
  free(e->source);
  free(e);
}

mscclppResult_t planreg_entry_from_plan(mscclppPlan_t plan, const mscclppPlanRegOptions_t* opts, const char* source,
                                        int file_rpn, int file_root, struct planreg_entry** out) {
  const char* src = source ? source : "(memory)";
  MPP_CHECK(planreg_check_options(src, opts));
  int rpn = opts && opts->ranksPerNode > 0 ? opts->ranksPerNode : file_rpn;
  int root = opts && opts->root >= 0 ? opts->root : (file_root >= 0 ? file_root : 0);
  MPP_CHECK_ARG(root < plan->nranks, "%s: root %d is not a rank of the plan's %d", src, root, plan->nranks);
  MPP_CHECK_ARG(rpn <= plan->nranks, "%s: %d ranks per node is more than the plan's %d ranks", src, rpn, plan->nranks);
  struct planreg_entry* e = calloc(1, sizeof(*e));
  char* s = strdup(src);
  if (e == NULL || s == NULL) {
    free(e), free(s);
    return MPP_ERR(mscclppSystemError, "%s: out of memory registering the plan", src);
  }
  e->rule = PLANREG_RULE_PLAN;
  e->priority = opts ? opts->priority : 0;
  e->coll = planreg_coll_of(plan->collective);
  e->nranks = plan->nranks, e->rpn = rpn, e->root = root, e->inplace = plan->inplace;
  e->min_bytes = plan->min_size, e->max_bytes = plan->max_size;
  e->redops = redop_mask(plan);
  e->plan[0] = plan;
  e->source = s;
  *out = e;
  return mscclppSuccess;
}

/* Reads a whole file into a new buffer (*len bytes, NUL-terminated). */
static mscclppResult_t read_all(const char* path, char** text, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (!f) return MPP_ERRNO(mscclppInvalidArgument, errno, "plan file %s", path);
  char* buf = malloc(PLAN_FILE_MAX + 1u);
  size_t n = buf ? fread(buf, 1, PLAN_FILE_MAX + 1u, f) : 0;
  int bad = ferror(f);
  fclose(f);
  if (buf == NULL) return MPP_ERR(mscclppSystemError, "plan file %s: out of memory", path);
  if (bad || n > PLAN_FILE_MAX) {
    free(buf);
    return MPP_ERR(mscclppInvalidArgument, "plan file %s: %s", path, bad ? "read error" : "larger than 256 MiB");
  }
  buf[n] = '\0';
  *text = buf, *len = n;
  return mscclppSuccess;
}

/* Optional integer field key of the top level in [lo, hi]; absent: *out untouched. Integers are
 * decoded as reals (plans write 2^64-1, which jansson's integers cannot hold). */
static mscclppResult_t int_field(const char* path, const json_t* root, const char* key, int lo, int hi, int* out) {
  const json_t* v = json_object_get(root, key);
  if (v == NULL) return mscclppSuccess;
  double d = json_is_number(v) ? json_number_value(v) : -1e300;
  if (!(d >= lo && d <= hi) || d != (double)(int)d)
    return MPP_ERR(mscclppInvalidArgument, "%s: field '%s': not an integer in [%d, %d]", path, key, lo, hi);
  *out = (int)d;
  return mscclppSuccess;
}

/* The file's ranks_per_node (1..nranks) and root (0..nranks-1) fields, 0 / -1 when absent. */
static mscclppResult_t file_fields(const char* path, const char* text, size_t len, int nranks, int* rpn, int* root) {
  json_error_t jerr;
  json_t* j = json_loadb(text, len, JSON_DECODE_INT_AS_REAL, &jerr);
  if (j == NULL) return MPP_ERR(mscclppInvalidArgument, "%s: line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
  *rpn = 0, *root = -1;
  mscclppResult_t res = int_field(path, j, "ranks_per_node", 1, nranks, rpn);
  if (res == mscclppSuccess) res = int_field(path, j, "root", 0, nranks - 1, root);
  json_decref(j);
  return res;
}

mscclppResult_t planreg_entry_from_file(const char* path, const mscclppPlanRegOptions_t* opts,
                                        struct planreg_entry** out) {
  char* text = NULL;
  size_t len = 0;
  struct mscclppPlan* plan = NULL;
  int rpn = 0, root = -1;
  MPP_CHECK(read_all(path, &text, &len));
  mscclppResult_t res = plan_parse(text, len, path, &plan);
  if (res == mscclppSuccess) res = file_fields(path, text, len, plan->nranks, &rpn, &root);
  if (res == mscclppSuccess) res = planreg_entry_from_plan(plan, opts, path, rpn, root, out);
  if (res != mscclppSuccess) plan_free(plan);
  free(text);
  return res;
}
