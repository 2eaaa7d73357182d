/* plan_registry_mp.h - what the plan-registry multi-process test's modes share (plan_registry.c):
 * the communicator, collective calls checked against exact results, and registry look-ups. */
#ifndef MPP_TESTS_PLAN_REGISTRY_MP_H_
#define MPP_TESTS_PLAN_REGISTRY_MP_H_

#include <mscclpp/executor.h>

#include "plan_registry_plans.h"
#include "transport_mp.h"

extern int g_rank, g_n;
extern mscclppComm_t g_comm;

/* Runs a float allreduce of count elements (in place or not) with op and checks every element:
 * the exact result, or (fake) this rank's own input, which only the fake copy plan produces. */
void preg_allreduce(size_t count, int inplace, mscclppRedOp_t op, int fake);
/* Float allgather of count elements per rank, checked. */
void preg_allgather(size_t count, int inplace);
/* How many calls registration id served so far. */
uint64_t preg_uses(int id);
/* Loads spec's plan from text and registers it; returns the id. */
int preg_register(const struct preg_spec* spec, int priority, int rpn, int root);
/* The id of the registration whose source ends with suffix (fails the test if none). */
int preg_find(const char* suffix);

/* The modes of plan_registry_env.c. */
void mode_env(void);
void mode_baddir(void);
void mode_xml(void);
void mode_badxml(void);
/* Makes a private directory of plans for this rank (bad: one of them broken) and sets
 * MSCCLPP_PLAN_DIR to it (before the communicator exists: parameters are read once). */
void preg_make_dir(char* dir, size_t len, int bad);
/* Removes the files and the directory made by preg_make_dir. */
void preg_remove_dir(const char* dir);

#endif /* MPP_TESTS_PLAN_REGISTRY_MP_H_ */
