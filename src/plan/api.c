/* api.c - the public plan calls: load (file or string), info, the order check, destroy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/handle_reg.h"
#include "plan/plan.h"
#include "plan/order/order.h"
#include "util/err.h"

#define PLAN_FILE_MAX (256u << 20)

mscclppResult_t mscclppPlanLoadString(const char* json, size_t len, const char* name, mscclppPlan_t* plan) {
  err_clear();
  MPP_CHECK_ARG(json != NULL && plan != NULL, "%s: json and plan must not be NULL", __func__);
  *plan = NULL;
  return plan_parse(json, len, name ? name : "(string)", plan);
}

mscclppResult_t mscclppPlanLoadFile(const char* path, mscclppPlan_t* plan) {
  err_clear();
  MPP_CHECK_ARG(path != NULL && plan != NULL, "%s: path and plan must not be NULL", __func__);
  *plan = NULL;
  FILE* f = fopen(path, "rb");
  if (!f) return MPP_ERRNO(mscclppInvalidArgument, errno, "plan file %s", path);
  /* A buffer of the file's size (a file that grows meanwhile reads as larger than that and fails);
   * the limit is checked before anything is allocated. */
  struct stat stb;
  size_t cap = fstat(fileno(f), &stb) == 0 && S_ISREG(stb.st_mode) ? (size_t)stb.st_size : PLAN_FILE_MAX;
  if (cap > PLAN_FILE_MAX) {
    fclose(f);
    return MPP_ERR(mscclppInvalidArgument, "plan file %s: %zu bytes; at most %u", path, cap, PLAN_FILE_MAX);
  }
  char* buf = malloc(cap + 1u);
  if (!buf) {
    fclose(f);
    return MPP_ERR(mscclppSystemError, "plan file %s: out of memory", path);
  }
  size_t n = fread(buf, 1, cap + 1u, f);
  int bad = ferror(f);
  fclose(f);
  mscclppResult_t res;
  if (bad) res = MPP_ERR(mscclppInvalidArgument, "plan file %s: read error", path);
  else if (n > cap) res = MPP_ERR(mscclppInvalidArgument, "plan file %s: larger than %zu bytes (%s)", path, cap,
                                  cap < PLAN_FILE_MAX ? "it grew while read" : "the limit");
  else res = plan_parse(buf, n, path, plan);
  free(buf);
  return res;
}

mscclppResult_t mscclppPlanDestroy(mscclppPlan_t plan) {
  err_clear();
  if (plan == NULL) return mscclppSuccess; /* as free(NULL) */
  MPP_CHECK(handle_check(HANDLE_PLAN, plan, __func__));
  const char* keeper = handle_keeper(HANDLE_PLAN, plan);
  if (keeper != NULL)
    return MPP_ERR(mscclppInvalidUsage, "%s: plan %p belongs to %s", __func__, (void*)plan, keeper);
  MPP_CHECK(handle_retire(HANDLE_PLAN, plan, __func__)); /* refused while another thread executes it */
  plan_free(plan);
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanInfo(mscclppPlan_t plan, mscclppPlanInfo_t* info) {
  err_clear();
  MPP_CHECK_ARG(info != NULL, "%s: info is NULL", __func__);
  HANDLE_CHECK(HANDLE_PLAN, plan);
  memset(info, 0, sizeof(*info));
  info->name = plan->name, info->collective = plan->collective, info->nranks = plan->nranks;
  info->protocolLL = plan->ll, info->inplace = plan->inplace;
  info->doubleScratch = plan->double_scratch, info->doubleScratchByCheck = plan->double_by_check;
  info->minMessageSize = plan->min_size, info->maxMessageSize = plan->max_size;
  for (int r = 0; r < plan->nranks; r++)
    if (plan->ranks[r].nblocks > info->maxBlocksPerRank) info->maxBlocksPerRank = plan->ranks[r].nblocks;
  return mscclppSuccess;
}

/* Clock entries the order check may use from the API (4 bytes each, 128 MiB): plans of 8 ranks x
 * 64 blocks x 30 ops fit. */
#define PLAN_ORDER_CLOCKS_API (32u << 20)

mscclppResult_t mscclppPlanCheckOrder(mscclppPlan_t plan, int* findings, char* text, size_t textLen) {
  err_clear();
  MPP_CHECK_ARG(findings != NULL, "%s: findings is NULL", __func__);
  HANDLE_CHECK(HANDLE_PLAN, plan);
  char local[512];
  char* out = text && textLen ? text : local;
  int n = plan_race_check(plan, PLAN_ORDER_CLOCKS_API, 64, out, text && textLen ? textLen : sizeof(local), NULL);
  if (n < 0) return MPP_ERR(mscclppInvalidUsage, "%s: the order check does not apply: %s", plan->file, out);
  *findings = n;
  return mscclppSuccess;
}
