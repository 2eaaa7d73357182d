/* xml_select.c - MSCCL's selection rule on a table of calls, loading through the public API and
 * MSCCL_XML_FILES, and rejection of broken files with messages naming file, line, element and
 * attribute. */
#include <stdlib.h>
#include <string.h>

#include <mscclpp/msccl_xml.h>

#include "helpers.h"
#include "plan/xml/xml.h"

#define DIR MPP_SOURCE_DIR "/tests/xml/"

static void expect_error(const char* what, mscclppResult_t res, const char* const* subs) {
  CHECK_MSG(res == mscclppInvalidArgument, "%s: result %d, want InvalidArgument", what, (int)res);
  const char* msg = mscclppGetLastError();
  for (int i = 0; subs[i]; i++) CHECK_MSG(strstr(msg, subs[i]), "%s: message lacks '%s': %s", what, subs[i], msg);
}

static void broken_files(void) {
  static const struct {
    const char* file;
    const char* subs[4];
  } cases[] = {
      {"bad_attr.xml", {"bad_attr.xml:5:", "<step> attribute 'type'", "'rx'", NULL}},
      {"bad_dep.xml", {"bad_dep.xml:5:", "attribute 'depid'", "tb 3 does not exist", NULL}},
      {"bad_chunk.xml", {"bad_chunk.xml:5:", "attribute 'srcoff'", "out of range", NULL}},
      {"bad_cycle.xml", {"bad_cycle.xml:", "cycle", "deadlock", NULL}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char path[512], *json = NULL;
    snprintf(path, sizeof(path), DIR "%s", cases[i].file);
    expect_error(cases[i].file, mscclppMscclXmlToPlanJson(path, &json, NULL), cases[i].subs);
    CHECK(json == NULL);
  }
  char* json;
  const char* missing[] = {"cannot open", "nope.xml", NULL};
  expect_error("missing", mscclppMscclXmlToPlanJson(DIR "nope.xml", &json, NULL), missing);
}

#define HEAD "<algo name=\"t\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"2\" coll=\"allreduce\" inplace=\"1\">\n"
#define G0 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\">\n"
#define G1 "<gpu id=\"1\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\">\n"
#define ST(s, t, d, ds, h) "<step s=\"" s "\" type=\"" t "\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"" d "\" deps=\"" ds "\" hasdep=\"" h "\"/>\n"

static void inline_cases(void) {
  static const struct {
    const char* xml;
    const char* subs[3];
  } cases[] = {
      {"<algo", {"mem.xml:1:", "XML error", NULL}},
      {"<foo/>", {"<foo>", "unexpected element", NULL}},
      {"<algo proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" coll=\"allreduce\" inplace=\"1\"/>",
       {"<algo> attribute 'ngpus'", "missing", NULL}},
      {"<algo proto=\"LL9\"/>", {"attribute 'proto'", "'LL9'", NULL}},
      {HEAD G0 "</gpu>\n<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"/></algo>", {"mem.xml:4:", "appears twice", NULL}},
      {HEAD G0 "</gpu></algo>", {"<gpu id=\"1\"> is missing", NULL, NULL}},
      {HEAD G0 "<tb id=\"0\" send=\"7\" recv=\"-1\" chan=\"0\"/></gpu></algo>", {"<tb> attribute 'send'", "out of range", NULL}},
      {HEAD G0 "<tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">\n<step s=\"0\" type=\"s\" srcbuf=\"q\"/></tb></gpu></algo>",
       {"mem.xml:4:", "attribute 'srcbuf'", NULL}},
      {HEAD G0 "<tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">\n<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"x1\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/></tb></gpu></algo>",
       {"attribute 'srcoff'", "not an integer", NULL}},
      {HEAD G0 "<tb id=\"0\" send=\"-1\" recv=\"-1\" chan=\"0\">\n" ST("0", "s", "-1", "-1", "0") "</tb></gpu></algo>",
       {"attribute 'type'", "send=-1", NULL}},
      {HEAD G0 "<tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">\n" ST("0", "s", "-1", "-1", "0") "</tb></gpu>" G1 "</gpu></algo>",
       {"no tb of gpu 1 receives", NULL, NULL}},
      {HEAD G0 "<tb id=\"0\" send=\"-1\" recv=\"-1\" chan=\"0\">\n" ST("0", "nop", "-1", "-1", "0") ST("1", "nop", "0", "0", "0")
       "</tb></gpu>" G1 "</gpu></algo>", {"hasdep", "is a dependency", NULL}},
      {"<!DOCTYPE a [<!ENTITY x \"y\">]><algo/>", {"entity", NULL, NULL}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct xml_algo* a = NULL;
    char what[32];
    snprintf(what, sizeof(what), "inline case %zu", i);
    expect_error(what, xml_parse_buffer("mem.xml", cases[i].xml, strlen(cases[i].xml), &a), cases[i].subs);
    CHECK(a == NULL);
  }
}

/* An LL algorithm where gpu 1 receives n messages of 2^24 chunks from gpu 0: converted, gpu 1
 * needs 3 * n * 2^24 scratch chunks. Malloc'ed text. */
static char* big_receive_xml(int n) {
  const int c = 1 << 24;
  size_t cap = 512 + (size_t)n * 2 * 128, len = 0;
  char* x = malloc(cap);
  CHECK(x != NULL);
  len += snprintf(x + len, cap - len, "<algo name=\"big\" proto=\"LL\" nchannels=\"1\" nchunksperloop=\"1\" "
                  "ngpus=\"2\" coll=\"allgather\" inplace=\"0\">\n");
  for (int g = 0; g < 2; g++) {
    len += snprintf(x + len, cap - len, "<gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"0\">"
                    "<tb id=\"0\" send=\"%d\" recv=\"%d\" chan=\"0\">\n", g, c, c, g ? -1 : 1, g ? 0 : -1);
    for (int s = 0; s < n; s++)
      len += snprintf(x + len, cap - len, "<step s=\"%d\" type=\"%s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                      "dstoff=\"0\" cnt=\"%d\"/>\n", s, g ? "r" : "s", c);
    len += snprintf(x + len, cap - len, "</tb></gpu>\n");
  }
  snprintf(x + len, cap - len, "</algo>\n");
  return x;
}

/* Converted scratch must fit the converter's int slot indices: 42 messages (3 * 42 * 2^24 chunks,
 * just below 2^31) convert; 43 are refused naming the gpu (the converter overflowed an int). */
static void scratch_limit(void) {
  struct xml_algo* a = NULL;
  char* x = big_receive_xml(42);
  CHECK_OK(xml_parse_buffer("big.xml", x, strlen(x), &a));
  char* json = NULL;
  CHECK_OK(xml_to_plan_text(a, &json, NULL));
  CHECK(strstr(json, "\"scratch_chunks\": 2113929216") != NULL);
  free(json);
  xml_algo_free(a);
  free(x);
  x = big_receive_xml(43);
  a = NULL;
  const char* subs[] = {"big.xml:47:", "gpu 1 receives 721420288 chunks", "at most 2147483647", NULL};
  expect_error("43 big messages", xml_parse_buffer("big.xml", x, strlen(x), &a), subs);
  CHECK(a == NULL);
  free(x);
}

/* A name longer than the 127 bytes kept is cut at a character boundary: cut inside the two-byte
 * 'é' it was not UTF-8, and the conversion of a checked algorithm failed ("out of memory"). */
static void long_name(void) {
  char xml[512], name[160];
  memset(name, 'a', 126);
  snprintf(name + 126, sizeof(name) - 126, "\xc3\xa9tail");
  snprintf(xml, sizeof(xml), "<algo name=\"%s\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"1\" "
           "coll=\"allgather\" inplace=\"0\"><gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">"
           "<copy i_off=\"0\" o_off=\"0\"/></gpu></algo>", name);
  struct xml_algo* a = NULL;
  CHECK_OK(xml_parse_buffer("name.xml", xml, strlen(xml), &a));
  CHECK(strlen(a->name) == 126 && strspn(a->name, "a") == 126);
  char* json = NULL;
  CHECK_OK(xml_to_plan_text(a, &json, NULL));
  free(json);
  xml_algo_free(a);
}

static void selection(void) {
  CHECK_OK(mscclppMscclXmlClear());
  CHECK_OK(mscclppMscclXmlLoad(DIR "allpairs_allreduce_ll.xml")); /* 0: allreduce, in place, < 64 KiB */
  CHECK_OK(mscclppMscclXmlLoad(DIR "ring_allreduce.xml"));        /* 1: allreduce, in place, < 1 GiB, 8 chunks */
  CHECK_OK(mscclppMscclXmlLoad(DIR "ring_allgather.xml"));        /* 2: allgather, out of place, < 128 MiB */
  static const struct {
    const char* coll;
    size_t count, tsize;
    int nranks, inplace;
    const char* op;
    int want;
  } t[] = {
      {"allreduce", 1024, 4, 4, 1, "sum", 0},        /* 4 KiB: all-pairs first */
      {"allreduce", 16384, 4, 4, 1, "sum", 1},       /* 64 KiB: maxBytes is exclusive -> ring */
      {"allreduce", 16383, 4, 4, 1, "sum", -1},      /* not divisible by 4 or 8 */
      {"allreduce", 16388, 4, 4, 1, "sum", -1},      /* too big for all-pairs, not divisible by 8 */
      {"allreduce", 1024, 4, 4, 0, "sum", -1},       /* out of place: none */
      {"allreduce", 1024, 4, 8, 1, "sum", -1},       /* 8 ranks: none */
      {"allreduce", 1024, 4, 4, 1, "avg", -1},       /* avg is not MSCCL's */
      {"allreduce", 1024, 4, 4, 1, "max", 0},
      {"allreduce", (size_t)1 << 28, 4, 4, 1, "sum", -1}, /* 1 GiB: ring's maxBytes excludes it */
      {"allgather", 1, 4, 4, 0, NULL, 2},            /* 1 x 4 ranks divides by 4 */
      {"allgather", 3, 2, 4, 0, NULL, 2},
      {"allgather", (size_t)1 << 25, 1, 4, 0, NULL, -1}, /* 128 MiB total: default maxBytes */
      {"allgather", 1, 4, 4, 1, NULL, -1},           /* in place: none */
      {"reducescatter", 4, 4, 4, 0, "sum", -1},
  };
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
    int idx = -2;
    CHECK_OK(mscclppMscclXmlSelect(t[i].coll, t[i].count, t[i].tsize, t[i].nranks, t[i].inplace, t[i].op, &idx));
    CHECK_MSG(idx == t[i].want, "case %zu (%s count %zu): selected %d, want %d", i, t[i].coll, t[i].count, idx, t[i].want);
  }
  char name[64], *json;
  size_t len;
  CHECK_OK(mscclppMscclXmlGetPlan(1, name, sizeof(name), &json, &len));
  CHECK(strcmp(name, "ring_allreduce_4") == 0 && len > 0 && strstr(json, "\"collective\": \"allreduce\""));
  free(json);
  CHECK_RES(mscclppMscclXmlGetPlan(3, NULL, 0, &json, &len), mscclppInvalidArgument);
  CHECK_RES(mscclppMscclXmlSelect(NULL, 1, 4, 4, 1, NULL, &(int){0}), mscclppInvalidArgument);
}

static void from_env(void) {
  CHECK_OK(mscclppMscclXmlClear());
  int n = -1;
  unsetenv("MSCCL_XML_FILES");
  CHECK_OK(mscclppMscclXmlLoadFromEnv(&n));
  CHECK(n == 0);
  setenv("MSCCL_XML_FILES", DIR "ring_allreduce.xml::" DIR "ring_allgather.xml", 1);
  CHECK_OK(mscclppMscclXmlLoadFromEnv(&n));
  CHECK(n == 2 && xml_registry_count() == 2);
  setenv("MSCCL_XML_FILES", DIR "ring_allgather.xml:" DIR "bad_dep.xml", 1);
  CHECK_RES(mscclppMscclXmlLoadFromEnv(&n), mscclppInvalidArgument);
  CHECK(n == 1 && strstr(mscclppGetLastError(), "bad_dep.xml"));
  CHECK_OK(mscclppMscclXmlClear());
  CHECK(xml_registry_count() == 0);
}

int main(void) {
  broken_files();
  inline_cases();
  scratch_limit();
  long_name();
  selection();
  from_env();
  printf("xml_select: ok\n");
  return 0;
}
