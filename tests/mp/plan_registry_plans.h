/* plan_registry_plans.h - small execution plans (JSON text) for the plan-registry tests, written
 * with jansson: one threadblock per rank, one memory channel per peer. */
#ifndef MPP_TESTS_PLAN_REGISTRY_PLANS_H_
#define MPP_TESTS_PLAN_REGISTRY_PLANS_H_

#include <stdint.h>

enum preg_kind {
  PREG_ALLREDUCE,     /* all-pairs: chunk p to rank p's scratch, reduce, result to everyone */
  PREG_FAKE_COPY,     /* "allreduce" that only copies the input: its output shows that it ran */
  PREG_ALLGATHER,     /* out of place */
  PREG_REDUCESCATTER,
  PREG_ALLTOALL,
  PREG_BROADCAST      /* from spec.root */
};

struct preg_spec {
  enum preg_kind kind;
  int nranks;
  const char* name;
  int inplace;
  const char* redop;       /* reduce ops' operator; NULL: sum */
  uint64_t min, max;       /* min/max_message_size; max 0: 2^64-1 */
  int root;                /* broadcast: who sends */
  int rpn_field;           /* > 0: write "ranks_per_node" */
  int root_field;          /* >= 0: write "root" */
};

/* The plan as JSON text (malloc'ed; exits the test on failure). */
char* preg_plan(const struct preg_spec* s);
/* Writes text to path (exits the test on failure). */
void preg_write(const char* path, const char* text);

#endif /* MPP_TESTS_PLAN_REGISTRY_PLANS_H_ */
