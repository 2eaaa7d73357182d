/* plan_registry_env.c - the plan registry's environment sources (modes of plan_registry.c):
 * MSCCLPP_PLAN_DIR (a private directory per rank, written here before the communicator exists)
 * and MSCCL_XML_FILES (set by the test's registration to samples of tests/xml). */
#include <sys/stat.h>
#include <unistd.h>

#include "plan_registry_mp.h"

static void put_plan(const char* dir, const char* file, const struct preg_spec* s, const char* from, const char* to) {
  char path[512];
  char* text = preg_plan(s);
  if (from) { /* a broken variant: replace the first `from` by `to` (same length) */
    char* at = strstr(text, from);
    CHECK(at != NULL && strlen(from) == strlen(to));
    memcpy(at, to, strlen(to));
  }
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  preg_write(path, text);
  free(text);
}

void preg_make_dir(char* dir, size_t len, int bad) {
  const char* ws = getenv("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(ws != NULL, "MSCCLPP_WORLD_SIZE is not set (run under mscclpp-run)");
  int n = atoi(ws);
  snprintf(dir, len, "/tmp/mpp_planreg_XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  struct preg_spec ar = {PREG_ALLREDUCE, n, "dir_allreduce", 0, NULL, 0, 0, 0, n, -1};
  if (bad) {
    put_plan(dir, "a_good.json", &ar, NULL, NULL);
    put_plan(dir, "b_bad.json", &ar, "\"Simple\"", "\"Simplx\"");
  } else {
    struct preg_spec ag = {PREG_ALLGATHER, n, "dir_allgather", 0, NULL, 0, 0, 0, 0, -1};
    struct preg_spec fk = {PREG_FAKE_COPY, n, "dir_fake_rpn2", 0, NULL, 0, 0, 0, 2, -1};
    struct preg_spec bc = {PREG_BROADCAST, n, "dir_bcast_root", 0, NULL, 0, 0, n - 1, 0, n - 1};
    put_plan(dir, "a_allgather.json", &ag, NULL, NULL);
    put_plan(dir, "b_allreduce.json", &ar, NULL, NULL);
    put_plan(dir, "c_fake.json", &fk, NULL, NULL);
    put_plan(dir, "d_bcast.json", &bc, NULL, NULL);
    char path[512];
    snprintf(path, sizeof(path), "%s/notes.txt", dir);
    preg_write(path, "not a plan");
    snprintf(path, sizeof(path), "%s/.hidden.json", dir);
    preg_write(path, "not a plan either");
    snprintf(path, sizeof(path), "%s/sub.json", dir);
    CHECK(mkdir(path, 0700) == 0);
  }
  CHECK(setenv("MSCCLPP_PLAN_DIR", dir, 1) == 0);
  CHECK(setenv("MSCCLPP_PLAN_DIR_PRIORITY", "3", 1) == 0);
}

void preg_remove_dir(const char* dir) {
  static const char* const files[] = {"a_good.json", "b_bad.json", "a_allgather.json", "b_allreduce.json",
                                      "c_fake.json", "d_bcast.json", "notes.txt", ".hidden.json"};
  char path[512];
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
    unlink(path);
  }
  snprintf(path, sizeof(path), "%s/sub.json", dir);
  rmdir(path);
  CHECK(rmdir(dir) == 0);
}

/* MSCCLPP_PLAN_DIR: loaded by the first collective; only *.json files that are not hidden; the
 * files' ranks_per_node and root fields; MSCCLPP_PLAN_DIR_PRIORITY against user registrations. */
void mode_env(void) {
  preg_allreduce(256, 0, mscclppSum, 0);
  int n;
  CHECK_OK(mscclppPlanRegistryLoadEnv(&n));
  CHECK(n == 4);
  int ag = preg_find("/a_allgather.json"), ar = preg_find("/b_allreduce.json");
  int fk = preg_find("/c_fake.json"), bc = preg_find("/d_bcast.json");
  mscclppPlanEntryInfo_t info;
  CHECK_OK(mscclppPlanRegistryQuery(fk, &info));
  CHECK(info.priority == 3 && info.ranksPerNode == 2 && info.msccl == 0 && strcmp(info.name, "dir_fake_rpn2") == 0);
  CHECK_OK(mscclppPlanRegistryQuery(bc, &info));
  CHECK(info.root == g_n - 1 && strcmp(info.collective, "broadcast") == 0);
  CHECK(preg_uses(ar) == 1 && preg_uses(fk) == 0);
  preg_allgather(100, 0);
  CHECK(preg_uses(ag) == 1);
  float x[50], y[50];
  for (int i = 0; i < 50; i++) x[i] = (float)(g_rank * 100 + i), y[i] = -1.0f;
  CHECK_OK(mscclppBroadcast(x, y, 50, mscclppFloat, g_n - 1, g_comm, NULL));
  for (int i = 0; i < 50; i++) CHECK(y[i] == (float)((g_n - 1) * 100 + i));
  CHECK(preg_uses(bc) == 1);
  struct preg_spec f = {PREG_FAKE_COPY, g_n, "user_fake", 0, NULL, 0, 0, 0, 0, -1};
  int low = preg_register(&f, 2, 0, -1);
  preg_allreduce(256, 0, mscclppSum, 0); /* the directory's priority 3 wins */
  CHECK(preg_uses(ar) == 2 && preg_uses(low) == 0);
  CHECK_OK(mscclppPlanUnregister(low));
  int high = preg_register(&f, 4, 0, -1);
  preg_allreduce(256, 0, mscclppSum, 1);
  CHECK(preg_uses(high) == 1);
}

/* A bad file in MSCCLPP_PLAN_DIR: every collective fails naming it; nothing of the directory is
 * registered; Clear forgets the failure. */
void mode_baddir(void) {
  float x[16] = {0}, y[16 * 64];
  CHECK(g_n <= 64);
  for (int k = 0; k < 2; k++) {
    CHECK_RES(mscclppAllReduce(x, y, 16, mscclppFloat, mscclppSum, g_comm, NULL), mscclppInvalidArgument);
    CHECK_ERR_MENTIONS("MSCCLPP_PLAN_DIR=");
    CHECK_ERR_MENTIONS("/b_bad.json");
    CHECK_ERR_MENTIONS("protocol");
  }
  CHECK_RES(mscclppAllGather(x, y, 16, mscclppFloat, g_comm, NULL), mscclppInvalidArgument);
  CHECK_ERR_MENTIONS("/b_bad.json");
  int n = -1;
  CHECK_RES(mscclppPlanRegistryLoadEnv(&n), mscclppInvalidArgument);
  CHECK(n == 0);
  CHECK_OK(mscclppPlanRegistryList(NULL, 0, &n));
  CHECK(n == 0);
  CHECK_RES(mscclppPlanRegisterDirectory(getenv("MSCCLPP_PLAN_DIR"), NULL, &n), mscclppInvalidArgument);
  CHECK_ERR_MENTIONS("/b_bad.json");
  CHECK_OK(mscclppPlanRegistryList(NULL, 0, &n));
  CHECK(n == 0);
  CHECK_OK(mscclppPlanRegistryClear());
  preg_allreduce(256, 0, mscclppSum, 0);
}

/* MSCCL_XML_FILES = allpairs_allreduce_ll (in place, LL, 4 chunks, < 64 KiB) : ring_allreduce (in
 * place, 8 chunks, < 1 GiB) : ring_allgather (out of place, 4 chunks). MSCCL's rule: the first
 * loaded that serves (collective, in place, ngpus, count divisible, min <= bytes < max, op). */
void mode_xml(void) {
  CHECK(g_n == 4);
  preg_allreduce(1000, 1, mscclppSum, 0);
  int ap = preg_find("/allpairs_allreduce_ll.xml"), ring = preg_find("/ring_allreduce.xml");
  int ag = preg_find("/ring_allgather.xml");
  mscclppPlanEntryInfo_t info;
  CHECK_OK(mscclppPlanRegistryQuery(ring, &info));
  CHECK(info.msccl == 1 && strcmp(info.name, "ring_allreduce_4") == 0 && strcmp(info.collective, "allreduce") == 0);
  CHECK(preg_uses(ap) == 1 && preg_uses(ring) == 0); /* both serve; allpairs was loaded first */
  preg_allreduce(32768, 1, mscclppSum, 0);            /* 128 KiB: over allpairs' maxBytes */
  CHECK(preg_uses(ap) == 1 && preg_uses(ring) == 1);
  preg_allreduce(1001, 1, mscclppSum, 0);  /* divides by neither 4 nor 8 */
  preg_allreduce(32772, 1, mscclppSum, 0); /* too large for allpairs, not a multiple of 8 */
  preg_allreduce(1000, 0, mscclppSum, 0);  /* out of place */
  preg_allreduce(1000, 1, mscclppAvg, 0);  /* MSCCL serves sum, prod, max, min only */
  CHECK(preg_uses(ap) == 1 && preg_uses(ring) == 1);
  preg_allreduce(1000, 1, mscclppMax, 0); /* the plan made for max */
  preg_allreduce(1000, 1, mscclppMin, 0);
  preg_allreduce(1000, 1, mscclppProd, 0);
  CHECK(preg_uses(ap) == 4);
  preg_allgather(250, 0);
  preg_allgather(250, 1); /* in place: ring_allgather is out of place */
  CHECK(preg_uses(ag) == 1);
  struct preg_spec s = {PREG_ALLREDUCE, g_n, "json_inplace", 1, NULL, 0, 0, 0, 0, -1};
  int hi = preg_register(&s, 1, 0, -1); /* priority over MSCCL_XML_PRIORITY's 0 */
  preg_allreduce(1000, 1, mscclppSum, 0);
  CHECK(preg_uses(hi) == 1 && preg_uses(ap) == 4);
  CHECK_OK(mscclppPlanUnregister(hi));
  int lo = preg_register(&s, -1, 0, -1);
  preg_allreduce(1000, 1, mscclppSum, 0);
  CHECK(preg_uses(lo) == 0 && preg_uses(ap) == 5);
}

/* MSCCL_XML_FILES with a broken file after a good one: every collective fails naming the broken
 * one, and neither is registered. */
void mode_badxml(void) {
  float x[16] = {0}, y[16];
  CHECK_RES(mscclppAllReduce(x, y, 16, mscclppFloat, mscclppSum, g_comm, NULL), mscclppInvalidArgument);
  CHECK_ERR_MENTIONS("MSCCL_XML_FILES=");
  CHECK_ERR_MENTIONS("bad_cycle.xml");
  int n;
  CHECK_OK(mscclppPlanRegistryList(NULL, 0, &n));
  CHECK(n == 0);
  CHECK_OK(mscclppPlanRegistryClear());
  preg_allreduce(256, 1, mscclppSum, 0);
}
