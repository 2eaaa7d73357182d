/* xml.c - registry entries for MSCCL XML algorithms: parsed and checked (plan/xml/parse.c),
 * converted to our plan form (plan/xml/convert.c), selected by MSCCL's rule (coll/registry/match.c).
 *
 * MSCCL files name no reduce operator (the call does) and the converter emits "sum"; a plan names
 * its operator in every reduce op. So an allreduce or reducescatter algorithm becomes four plans,
 * one per operator MSCCL's rule admits (sum, prod, max, min), made here once. */
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "coll/registry/registry.h"
#include "util/err.h"

/* Sets "reduce_op" to op wherever an op of the plan JSON has one (nested pipeline ops too). */
static void set_redop_ops(json_t* ops, const char* op) {
  size_t i;
  json_t* o;
  json_array_foreach(ops, i, o) {
    if (json_object_get(o, "reduce_op") != NULL) json_object_set_new(o, "reduce_op", json_string(op));
    json_t* nested = json_object_get(o, "ops");
    if (json_is_array(nested)) set_redop_ops(nested, op);
  }
}

static void set_redop(json_t* plan, const char* op) {
  size_t g, t;
  json_t *gpu, *tb;
  json_array_foreach(json_object_get(plan, "gpus"), g, gpu) {
    json_array_foreach(json_object_get(gpu, "threadblocks"), t, tb) set_redop_ops(json_object_get(tb, "ops"), op);
  }
}

/* Loads the plan JSON j with every reduce op using op. */
static mscclppResult_t variant(const char* path, json_t* j, const char* op, mscclppPlan_t* out) {
  set_redop(j, op);
  char* text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (text == NULL) return MPP_ERR(mscclppSystemError, "%s: out of memory serializing the converted plan", path);
  mscclppResult_t res = plan_parse(text, strlen(text), path, out);
  free(text);
  return res;
}

/* The entry's header fields and its plans, from a checked algorithm. */
static mscclppResult_t fill(const char* path, const struct xml_algo* a, const mscclppPlanRegOptions_t* opts,
                            struct planreg_entry* e) {
  static const char* const ops[PLANREG_NOPS] = {"sum", "prod", "max", "min"};
  e->rule = PLANREG_RULE_MSCCL;
  e->priority = opts ? opts->priority : 0;
  e->xml = *a;
  e->xml.gpus = NULL; /* only the header: MSCCL's rule reads nothing else */
  e->coll = planreg_coll_of(a->coll);
  e->nranks = a->ngpus, e->inplace = a->inplace, e->rpn = 0, e->root = 0;
  e->min_bytes = a->min_bytes, e->max_bytes = a->max_bytes;
  e->source = strdup(path);
  if (e->source == NULL) return MPP_ERR(mscclppSystemError, "%s: out of memory registering the algorithm", path);
  json_t* j;
  MPP_CHECK(xml_to_plan(a, &j));
  int nvar = e->coll == ALGO_COLL_ALLREDUCE || e->coll == ALGO_COLL_REDUCESCATTER ? PLANREG_NOPS : 1;
  mscclppResult_t res = mscclppSuccess;
  for (int k = 0; k < nvar && res == mscclppSuccess; k++) res = variant(path, j, ops[k], &e->plan[k]);
  json_decref(j);
  return res;
}

mscclppResult_t planreg_entry_from_xml(const char* path, const mscclppPlanRegOptions_t* opts,
                                       struct planreg_entry** out) {
  MPP_CHECK(planreg_check_options(path, opts));
  struct xml_algo* a;
  MPP_CHECK(xml_parse_file(path, &a));
  struct planreg_entry* e = calloc(1, sizeof(*e));
  mscclppResult_t res = e ? fill(path, a, opts, e) : MPP_ERR(mscclppSystemError, "%s: out of memory", path);
  xml_algo_free(a);
  if (res != mscclppSuccess) {
    planreg_entry_free(e);
    return res;
  }
  *out = e;
  return mscclppSuccess;
}
