/* plan_registry_api.c - the public registration calls in one process (no ranks): ids, listing in
 * selection order, queries, ownership, duplicates, bad options, files, directories (all or
 * nothing, bad files named), MSCCL XML files, the size limit, Clear and the environment. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mscclpp/executor.h>

#include "helpers.h"
#include "mp/plan_registry_plans.h"

#define XML_DIR MPP_SOURCE_DIR "/tests/xml/"
#define MENTIONS(what) CHECK_MSG(strstr(mscclppGetLastError(), (what)) != NULL, "expected '%s' in: %s", (what), mscclppGetLastError())

static mscclppPlan_t load(const struct preg_spec* s) {
  char* text = preg_plan(s);
  mscclppPlan_t p;
  CHECK_OK(mscclppPlanLoadString(text, strlen(text), s->name, &p));
  free(text);
  return p;
}

static int count(void) {
  int n;
  CHECK_OK(mscclppPlanRegistryList(NULL, 0, &n));
  return n;
}

static void register_and_list(void) {
  struct preg_spec s = {PREG_ALLREDUCE, 2, "ar2", 0, NULL, 0, 0, 0, 0, -1};
  mscclppPlan_t p1 = load(&s), p2 = load(&s), p3 = load(&s);
  mscclppPlanRegOptions_t o = MSCCLPP_PLAN_REG_OPTIONS_INITIALIZER;
  int a, b, c;
  CHECK_OK(mscclppPlanRegister(p1, NULL, &a));
  o.priority = 7;
  CHECK_OK(mscclppPlanRegister(p2, &o, &b));
  CHECK_OK(mscclppPlanRegister(p3, NULL, &c));
  CHECK(a > 0 && b > a && c > b);
  int ids[3], n;
  CHECK_OK(mscclppPlanRegistryList(ids, 3, &n));
  CHECK(n == 3 && ids[0] == b && ids[1] == a && ids[2] == c); /* priority, then registration order */
  mscclppPlanEntryInfo_t info;
  CHECK_OK(mscclppPlanRegistryQuery(b, &info));
  CHECK(info.id == b && info.priority == 7 && info.plan == p2 && info.uses == 0 && info.msccl == 0);
  CHECK(strcmp(info.name, "ar2") == 0 && strcmp(info.collective, "allreduce") == 0 && strcmp(info.source, "ar2") == 0);
  CHECK_RES(mscclppPlanRegister(p1, NULL, NULL), mscclppInvalidUsage); /* registered already */
  MENTIONS("registered already");
  CHECK_OK(mscclppPlanUnregister(a));
  CHECK_RES(mscclppPlanUnregister(a), mscclppInvalidArgument);
  MENTIONS("no plan is registered with id");
  CHECK_RES(mscclppPlanRegistryQuery(a, &info), mscclppInvalidArgument);
  CHECK(count() == 2);
  CHECK_OK(mscclppPlanRegistryClear());
  CHECK(count() == 0);
}

static void bad_options(void) {
  struct preg_spec s = {PREG_BROADCAST, 2, "bc2", 0, NULL, 0, 0, 1, 0, -1};
  mscclppPlan_t p = load(&s);
  mscclppPlanRegOptions_t o = {0, -1, -1};
  CHECK_RES(mscclppPlanRegister(p, &o, NULL), mscclppInvalidArgument);
  MENTIONS("ranksPerNode -1");
  o.ranksPerNode = 3;
  CHECK_RES(mscclppPlanRegister(p, &o, NULL), mscclppInvalidArgument);
  MENTIONS("more than the plan's 2 ranks");
  o.ranksPerNode = 0, o.root = -2;
  CHECK_RES(mscclppPlanRegister(p, &o, NULL), mscclppInvalidArgument);
  o.root = 2;
  CHECK_RES(mscclppPlanRegister(p, &o, NULL), mscclppInvalidArgument);
  MENTIONS("root 2 is not a rank");
  CHECK_RES(mscclppPlanRegister(NULL, NULL, NULL), mscclppInvalidArgument);
  CHECK(count() == 0);
  CHECK_OK(mscclppPlanDestroy(p)); /* a failed registration leaves the plan with the caller */
}

static void write_plan(const char* dir, const char* file, const char* text) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  preg_write(path, text);
}

static void files_and_directories(void) {
  CHECK_RES(mscclppPlanRegisterFile("/nonexistent/p.json", NULL, NULL), mscclppInvalidArgument);
  MENTIONS("/nonexistent/p.json");
  CHECK_RES(mscclppPlanRegisterDirectory("/nonexistent/plans", NULL, NULL), mscclppInvalidArgument);
  MENTIONS("/nonexistent/plans");
  char dir[] = "/tmp/mpp_planreg_api_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  struct preg_spec s = {PREG_ALLGATHER, 3, "ag3", 0, NULL, 0, 0, 0, 0, -1};
  char* good = preg_plan(&s);
  write_plan(dir, "a.json", good);
  write_plan(dir, "b.json", good);
  write_plan(dir, "c.json", "{\"name\": \"x\",\n \"gpus\": [ }\n");
  int n = -1;
  CHECK_RES(mscclppPlanRegisterDirectory(dir, NULL, &n), mscclppInvalidArgument);
  MENTIONS("c.json");
  MENTIONS("line 2");
  CHECK(count() == 0); /* all or nothing */
  char path[512];
  snprintf(path, sizeof(path), "%s/c.json", dir);
  unlink(path);
  mscclppPlanRegOptions_t o = {2, 0, -1};
  CHECK_OK(mscclppPlanRegisterDirectory(dir, &o, &n));
  CHECK(n == 2 && count() == 2);
  int ids[2];
  mscclppPlanEntryInfo_t info;
  CHECK_OK(mscclppPlanRegistryList(ids, 2, &n));
  CHECK_OK(mscclppPlanRegistryQuery(ids[0], &info));
  CHECK(info.priority == 2 && strstr(info.source, "/a.json") != NULL); /* name order */
  int id;
  snprintf(path, sizeof(path), "%s/a.json", dir);
  CHECK_OK(mscclppPlanRegisterFile(path, NULL, &id));
  CHECK(count() == 3);
  CHECK_OK(mscclppPlanRegistryClear());
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof(path), "%s/%c.json", dir, "ab"[i]);
    unlink(path);
  }
  CHECK(rmdir(dir) == 0);
  free(good);
}

static void msccl_files(void) {
  int id;
  CHECK_OK(mscclppPlanRegisterMscclXml(XML_DIR "ring_allreduce_ll.xml", NULL, &id));
  mscclppPlanEntryInfo_t info;
  CHECK_OK(mscclppPlanRegistryQuery(id, &info));
  CHECK(info.msccl == 1 && strcmp(info.name, "ring_allreduce_ll_4") == 0 && info.plan != NULL);
  mscclppPlanInfo_t pi;
  CHECK_OK(mscclppPlanInfo(info.plan, &pi));
  CHECK(pi.protocolLL == 1 && pi.nranks == 4 && pi.inplace == 1);
  CHECK_RES(mscclppPlanRegisterMscclXml(XML_DIR "bad_dep.xml", NULL, &id), mscclppInvalidArgument);
  MENTIONS("bad_dep.xml");
  CHECK(count() == 1);
  CHECK_OK(mscclppPlanRegistryClear());
}

/* At most 256 registrations at once; the 257th is refused naming the limit. */
static void limit(void) {
  struct preg_spec s = {PREG_FAKE_COPY, 1, "one", 0, NULL, 0, 0, 0, 0, -1};
  char* text = preg_plan(&s);
  for (int i = 0; i <= 256; i++) {
    mscclppPlan_t p;
    CHECK_OK(mscclppPlanLoadString(text, strlen(text), "one", &p));
    mscclppResult_t res = mscclppPlanRegister(p, NULL, NULL);
    if (i < 256) CHECK_OK(res);
    else {
      CHECK(res == mscclppInvalidUsage);
      MENTIONS("exceed 256");
      CHECK_OK(mscclppPlanDestroy(p));
    }
  }
  free(text);
  CHECK(count() == 256);
  CHECK_OK(mscclppPlanRegistryClear());
}

static int never(const mscclppPlanQuery_t* q, const mscclppPlanCandidate_t* c, int n, void* user) {
  (void)q, (void)c, (void)n, (void)user;
  return 0;
}

int main(void) {
  unsetenv("MSCCLPP_PLAN_DIR");
  unsetenv("MSCCL_XML_FILES");
  int n = -1;
  CHECK_OK(mscclppPlanRegistryLoadEnv(&n)); /* nothing set: nothing loaded */
  CHECK(n == 0 && count() == 0);
  register_and_list();
  bad_options();
  files_and_directories();
  msccl_files();
  limit();
  CHECK_OK(mscclppPlanSelectorSet(never, NULL));
  CHECK_OK(mscclppPlanSelectorSet(NULL, NULL));
  CHECK_RES(mscclppPlanRegistryList(NULL, 1, &n), mscclppInvalidArgument);
  printf("plan_registry_api: ok\n");
  return 0;
}
