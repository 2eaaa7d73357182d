/* api.c - the public plan-registry calls of executor.h (the directory and the environment
 * are in coll/registry/env.c). */
#include "plan/plan.h"
#include "coll/registry/registry.h"
#include "core/handle_reg.h"
#include "util/err.h"

/* Registers one made entry; frees it when that fails (free_plan: its plan too). */
static mscclppResult_t add_one(struct planreg_entry* e, int free_plan, int* id) {
  mscclppResult_t res = planreg_add(&e, 1, id);
  if (res != mscclppSuccess) {
    if (!free_plan) e->plan[0] = NULL; /* the caller keeps it */
    planreg_entry_free(e);
  }
  return res;
}

mscclppResult_t mscclppPlanRegister(mscclppPlan_t plan, const mscclppPlanRegOptions_t* options, int* id) {
  err_clear();
  HANDLE_CHECK(HANDLE_PLAN, plan);
  struct planreg_entry* e;
  MPP_CHECK(planreg_entry_from_plan(plan, options, plan->file, 0, -1, &e));
  return add_one(e, 0, id);
}

mscclppResult_t mscclppPlanRegisterFile(const char* path, const mscclppPlanRegOptions_t* options, int* id) {
  err_clear();
  MPP_CHECK_ARG(path != NULL, "%s: path is NULL", __func__);
  struct planreg_entry* e;
  MPP_CHECK(planreg_entry_from_file(path, options, &e));
  return add_one(e, 1, id);
}

mscclppResult_t mscclppPlanRegisterMscclXml(const char* path, const mscclppPlanRegOptions_t* options, int* id) {
  err_clear();
  MPP_CHECK_ARG(path != NULL, "%s: path is NULL", __func__);
  struct planreg_entry* e;
  MPP_CHECK(planreg_entry_from_xml(path, options, &e));
  return add_one(e, 1, id);
}

mscclppResult_t mscclppPlanUnregister(int id) {
  err_clear();
  int removed;
  MPP_CHECK(planreg_remove_ids(&id, 1, &removed));
  MPP_CHECK_ARG(removed == 1, "%s: no plan is registered with id %d", __func__, id);
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanRegistryClear(void) {
  err_clear();
  planreg_clear();
  planreg_env_reset_done();
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanRegistryList(int* ids, int maxIds, int* count) {
  err_clear();
  MPP_CHECK_ARG(count != NULL, "%s: count is NULL", __func__);
  MPP_CHECK_ARG(maxIds >= 0 && (maxIds == 0 || ids != NULL), "%s: ids is NULL or maxIds %d is negative", __func__,
                maxIds);
  *count = planreg_list(ids, maxIds);
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanRegistryQuery(int id, mscclppPlanEntryInfo_t* info) {
  err_clear();
  MPP_CHECK_ARG(info != NULL, "%s: info is NULL", __func__);
  MPP_CHECK_ARG(planreg_info(id, info), "%s: no plan is registered with id %d", __func__, id);
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanSelectorSet(mscclppPlanSelector_t selector, void* userData) {
  err_clear();
  return planreg_set_selector(selector, userData);
}
