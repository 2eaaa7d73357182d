/* env.c - plans from a directory (mscclppPlanRegisterDirectory, MSCCLPP_PLAN_DIR) and
 * from MSCCL_XML_FILES, loaded once per process at the first collective (or at
 * mscclppPlanRegistryLoadEnv). A bad file fails the whole load, naming the file: nothing from the
 * environment is registered then and every collective fails with that message, as a bad
 * MSCCLPP_ALGO_TABLE does, so no rank silently runs something else than its peers. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/registry/registry.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#define ENV_ERR_MAX 2048

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int env_done; /* 1 once the environment was read (or Clear said not to) */
static mscclppResult_t env_res = mscclppSuccess;
static char env_err[ENV_ERR_MAX];
static int env_count;

static int by_name(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

static int is_plan_name(const char* s) {
  size_t n = strlen(s);
  return s[0] != '.' && n > 5 && strcmp(s + n - 5, ".json") == 0;
}

/* The *.json names of dir, sorted, into names[0..*n) (each malloc'ed). */
static mscclppResult_t list_dir(const char* dir, char** names, int* n) {
  DIR* d = opendir(dir);
  if (d == NULL) return MPP_ERRNO(mscclppInvalidArgument, errno, "plan directory %s", dir);
  mscclppResult_t res = mscclppSuccess;
  *n = 0;
  for (struct dirent* de; res == mscclppSuccess && (de = readdir(d)) != NULL;) {
    if (!is_plan_name(de->d_name) || de->d_type == DT_DIR) continue;
    if (*n == PLANREG_MAX) res = MPP_ERR(mscclppInvalidArgument, "plan directory %s: more than %d plans", dir, PLANREG_MAX);
    else if ((names[*n] = strdup(de->d_name)) == NULL) res = MPP_ERR(mscclppSystemError, "plan directory %s: out of memory", dir);
    else (*n)++;
  }
  closedir(d);
  qsort(names, (size_t)*n, sizeof(names[0]), by_name);
  return res;
}

/* Makes the entries of every plan of dir into es[0..*n); on failure none are left. */
static mscclppResult_t dir_entries(const char* dir, const mscclppPlanRegOptions_t* opts, struct planreg_entry** es,
                                   int* n) {
  char* names[PLANREG_MAX];
  int nn = 0;
  mscclppResult_t res = list_dir(dir, names, &nn);
  *n = 0;
  for (int i = 0; i < nn && res == mscclppSuccess; i++) {
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >= (int)sizeof(path))
      res = MPP_ERR(mscclppInvalidArgument, "plan directory %s: path of %s is too long", dir, names[i]);
    else res = planreg_entry_from_file(path, opts, &es[*n]);
    if (res == mscclppSuccess) (*n)++;
  }
  for (int i = 0; i < nn; i++) free(names[i]);
  if (res != mscclppSuccess) {
    for (int i = 0; i < *n; i++) planreg_entry_free(es[i]);
    *n = 0;
  }
  return res;
}

/* Registers es[0..n) at once, or frees them all. */
static mscclppResult_t add_all(struct planreg_entry** es, int n, int* ids) {
  mscclppResult_t res = planreg_add(es, n, ids);
  if (res != mscclppSuccess)
    for (int i = 0; i < n; i++) planreg_entry_free(es[i]);
  return res;
}

mscclppResult_t mscclppPlanRegisterDirectory(const char* dir, const mscclppPlanRegOptions_t* options, int* count) {
  err_clear();
  MPP_CHECK_ARG(dir != NULL, "%s: dir is NULL", __func__);
  MPP_CHECK(planreg_check_options(dir, options));
  struct planreg_entry* es[PLANREG_MAX];
  int n;
  MPP_CHECK(dir_entries(dir, options, es, &n));
  MPP_CHECK(add_all(es, n, NULL));
  if (count) *count = n;
  return mscclppSuccess;
}

/* The entries of every file of MSCCL_XML_FILES (colon-separated) into es[0..*n); all or none. */
static mscclppResult_t xml_entries(const char* list, const mscclppPlanRegOptions_t* opts, struct planreg_entry** es,
                                   int* n) {
  char* copy = strdup(list);
  if (copy == NULL) return MPP_ERR(mscclppSystemError, "MSCCL_XML_FILES: out of memory");
  mscclppResult_t res = mscclppSuccess;
  char* save = NULL;
  *n = 0;
  for (char* p = strtok_r(copy, ":", &save); p && res == mscclppSuccess; p = strtok_r(NULL, ":", &save)) {
    if (*n == PLANREG_MAX) res = MPP_ERR(mscclppInvalidArgument, "MSCCL_XML_FILES: more than %d files", PLANREG_MAX);
    else if ((res = planreg_entry_from_xml(p, opts, &es[*n])) == mscclppSuccess) (*n)++;
  }
  free(copy);
  if (res != mscclppSuccess) {
    for (int i = 0; i < *n; i++) planreg_entry_free(es[i]);
    *n = 0;
  }
  return res;
}

/* Adds the variable's name and value in front of this thread's last error. */
static mscclppResult_t name_var(mscclppResult_t res, const char* var, const char* value) {
  char msg[ENV_ERR_MAX];
  snprintf(msg, sizeof(msg), "%s", err_last());
  return MPP_ERR(res, "%s=%s: %s", var, value, msg);
}

/* MSCCLPP_PLAN_DIR, then MSCCL_XML_FILES; on failure nothing of either stays registered and the
 * message names the variable and (through the loader) the file. */
static mscclppResult_t load_env(int* count) {
  struct planreg_entry* es[PLANREG_MAX];
  int ids[PLANREG_MAX];
  int nd = 0, nx = 0;
  mscclppPlanRegOptions_t o = MSCCLPP_PLAN_REG_OPTIONS_INITIALIZER;
  const char* dir = param_str(PARAM_PLAN_DIR);
  const char* xml = getenv("MSCCL_XML_FILES");
  mscclppResult_t res = mscclppSuccess;
  *count = 0;
  if (dir[0] != '\0') {
    o.priority = (int)param_int(PARAM_PLAN_DIR_PRIORITY);
    res = dir_entries(dir, &o, es, &nd);
    if (res == mscclppSuccess) res = add_all(es, nd, ids);
    if (res != mscclppSuccess) return name_var(res, "MSCCLPP_PLAN_DIR", dir);
  }
  if (xml != NULL && xml[0] != '\0') {
    o.priority = (int)param_int(PARAM_MSCCL_XML_PRIORITY);
    res = xml_entries(xml, &o, es, &nx);
    if (res == mscclppSuccess) res = add_all(es, nx, NULL);
    if (res != mscclppSuccess) {
      res = name_var(res, "MSCCL_XML_FILES", xml);
      (void)planreg_remove_ids(ids, nd, NULL);
      return res;
    }
  }
  *count = nd + nx;
  if (*count) LOG_INFO_(LOG_SUB_EXEC, "plan registry: %d plans from MSCCLPP_PLAN_DIR, %d from MSCCL_XML_FILES", nd, nx);
  return mscclppSuccess;
}

/* The recorded result of the load, as this thread's error when it failed. */
static mscclppResult_t env_result(void) {
  if (env_res == mscclppSuccess) return mscclppSuccess;
  return MPP_ERR(env_res, "plan registry: %s", env_err);
}

mscclppResult_t planreg_env_ensure(void) {
  /* Acquire: env_res and env_err were written before the release store that set env_done. */
  if (atomic_load_explicit(&env_done, memory_order_acquire)) return env_result();
  pthread_mutex_lock(&env_lock);
  if (!atomic_load_explicit(&env_done, memory_order_relaxed)) {
    env_res = load_env(&env_count);
    if (env_res != mscclppSuccess) snprintf(env_err, sizeof(env_err), "%s", err_last());
    atomic_store_explicit(&env_done, 1, memory_order_release);
  }
  pthread_mutex_unlock(&env_lock);
  return env_result();
}

void planreg_env_reset_done(void) {
  pthread_mutex_lock(&env_lock);
  env_res = mscclppSuccess;
  env_count = 0;
  atomic_store_explicit(&env_done, 1, memory_order_release);
  pthread_mutex_unlock(&env_lock);
}

mscclppResult_t mscclppPlanRegistryLoadEnv(int* count) {
  err_clear();
  mscclppResult_t res = planreg_env_ensure();
  if (count) *count = res == mscclppSuccess ? env_count : 0;
  return res;
}
