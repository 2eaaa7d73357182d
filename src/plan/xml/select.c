/* select.c - MSCCL's selection rule and the process-wide set of loaded MSCCL algorithms
 * (from mscclppMscclXmlLoad and MSCCL_XML_FILES), plus the public msccl_xml.h entry points. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <mscclpp/msccl_xml.h>

#include "plan/xml/xml.h"

#define REG_MAX 256

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xml_algo* g_algos[REG_MAX];
static int g_n;

/* allgather, reducescatter and alltoall count per rank: MSCCL multiplies by ngpus. */
static size_t size_mult(const char* coll, int nranks) {
  if (strcmp(coll, "allgather") == 0 || strcmp(coll, "reducescatter") == 0 || strcmp(coll, "alltoall") == 0)
    return (size_t)nranks;
  return 1;
}

static int redop_ok(const char* op) {
  return !op || strcmp(op, "sum") == 0 || strcmp(op, "prod") == 0 || strcmp(op, "max") == 0 ||
         strcmp(op, "min") == 0;
}

int xml_serves(const struct xml_algo* a, const struct xml_query* q) {
  if (!a || !q || !q->coll || !redop_ok(q->redop) || q->nranks <= 0) return 0;
  if (strcmp(a->coll, q->coll) != 0 || a->inplace != (q->inplace ? 1 : 0) || a->ngpus != q->nranks) return 0;
  size_t m = size_mult(q->coll, q->nranks), total = q->count * m;
  if (m && total / m != q->count) return 0; /* overflow: too large for any algorithm */
  if (total % (size_t)a->nchunksperloop != 0) return 0;
  if (q->elem_size && total > SIZE_MAX / q->elem_size) return 0;
  uint64_t bytes = (uint64_t)total * q->elem_size;
  return bytes >= a->min_bytes && bytes < a->max_bytes;
}

int xml_select(struct xml_algo* const* algos, int n, const struct xml_query* q) {
  for (int i = 0; i < n; i++)
    if (xml_serves(algos[i], q)) return i;
  return -1;
}

mscclppResult_t xml_registry_add_file(const char* path) {
  struct xml_algo* a;
  MPP_CHECK(xml_parse_file(path, &a));
  pthread_mutex_lock(&g_lock);
  int full = g_n == REG_MAX;
  if (!full) g_algos[g_n++] = a;
  pthread_mutex_unlock(&g_lock);
  if (full) {
    xml_algo_free(a);
    return MPP_ERR(mscclppInvalidUsage, "%s: already %d MSCCL algorithms loaded", path, REG_MAX);
  }
  return mscclppSuccess;
}

mscclppResult_t xml_registry_add_list(const char* list, int* nloaded) {
  int n = 0;
  mscclppResult_t res = mscclppSuccess;
  char* copy = strdup(list ? list : "");
  if (!copy) return MPP_ERR(mscclppSystemError, "out of memory copying MSCCL_XML_FILES");
  char* save = NULL;
  for (char* p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
    if (*p == '\0') continue;
    res = xml_registry_add_file(p);
    if (res != mscclppSuccess) break;
    n++;
  }
  free(copy);
  if (nloaded) *nloaded = n;
  return res;
}

void xml_registry_clear(void) {
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_n; i++) xml_algo_free(g_algos[i]);
  g_n = 0;
  pthread_mutex_unlock(&g_lock);
}

int xml_registry_count(void) {
  pthread_mutex_lock(&g_lock);
  int n = g_n;
  pthread_mutex_unlock(&g_lock);
  return n;
}

mscclppResult_t mscclppMscclXmlToPlanJson(const char* path, char** json, size_t* len) {
  err_clear();
  MPP_CHECK_ARG(path && json, "mscclppMscclXmlToPlanJson: path and json must not be NULL");
  struct xml_algo* a;
  MPP_CHECK(xml_parse_file(path, &a));
  mscclppResult_t res = xml_to_plan_text(a, json, len);
  xml_algo_free(a);
  return res;
}

mscclppResult_t mscclppMscclXmlLoad(const char* path) {
  err_clear();
  MPP_CHECK_ARG(path, "mscclppMscclXmlLoad: path is NULL");
  return xml_registry_add_file(path);
}

mscclppResult_t mscclppMscclXmlLoadFromEnv(int* nloaded) {
  err_clear();
  return xml_registry_add_list(getenv("MSCCL_XML_FILES"), nloaded);
}

mscclppResult_t mscclppMscclXmlClear(void) {
  err_clear();
  xml_registry_clear();
  return mscclppSuccess;
}

mscclppResult_t mscclppMscclXmlSelect(const char* coll, size_t count, size_t typeSize, int nranks, int inplace,
                                      const char* redop, int* index) {
  err_clear();
  MPP_CHECK_ARG(coll && index, "mscclppMscclXmlSelect: coll and index must not be NULL");
  MPP_CHECK_ARG(nranks > 0 && typeSize > 0, "mscclppMscclXmlSelect: nranks %d and typeSize %zu must be positive",
                nranks, typeSize);
  struct xml_query q = {coll, count, typeSize, nranks, inplace, redop};
  pthread_mutex_lock(&g_lock);
  *index = xml_select(g_algos, g_n, &q);
  pthread_mutex_unlock(&g_lock);
  return mscclppSuccess;
}

mscclppResult_t mscclppMscclXmlGetPlan(int index, char* name, size_t nameLen, char** json, size_t* len) {
  err_clear();
  MPP_CHECK_ARG(json, "mscclppMscclXmlGetPlan: json is NULL");
  pthread_mutex_lock(&g_lock);
  mscclppResult_t res;
  if (index < 0 || index >= g_n) {
    res = MPP_ERR(mscclppInvalidArgument, "mscclppMscclXmlGetPlan: index %d not in [0, %d)", index, g_n);
  } else {
    if (name && nameLen) snprintf(name, nameLen, "%s", g_algos[index]->name);
    res = xml_to_plan_text(g_algos[index], json, len);
  }
  pthread_mutex_unlock(&g_lock);
  return res;
}
