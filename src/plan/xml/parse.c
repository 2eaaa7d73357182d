/* parse.c - reads an MSCCL algorithm file with expat into struct xml_algo. Every attribute is
 * checked as it is read (numbers, ranges, enumerations); whole-file rules (chunk ranges against
 * peers, matching sends, dependencies) are xml_check's. The first problem stops the parser and is
 * reported as "FILE:LINE: <element> attribute 'name': what is wrong". */
#include <errno.h>
#include <expat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/xml/xml.h"
#include "util/param.h"

enum { EL_NONE, EL_ALGO, EL_GPU, EL_TB, EL_COPY, EL_STEP };
#define MAX_DEPTH 8

struct pctx {
  XML_Parser p;
  const char* path;
  struct xml_algo* a;
  int depth, stack[MAX_DEPTH];
  struct xml_gpu* gpu; /* current <gpu> */
  struct xml_tb* tb;   /* current <tb> */
  int failed;
  long elems, max_elems; /* <copy> and <step> elements so far, and their limit (0: none) */
};


/* Records the first error (with file and current line) and stops the parser. */
static void fail(struct pctx* c, const char* el, const char* attr, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(struct pctx* c, const char* el, const char* attr, const char* fmt, ...) {
  if (c->failed) return;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  unsigned long line = (unsigned long)XML_GetCurrentLineNumber(c->p);
  if (attr)
    (void)MPP_ERR(mscclppInvalidArgument, "%s:%lu: <%s> attribute '%s': %s", c->path, line, el, attr, msg);
  else
    (void)MPP_ERR(mscclppInvalidArgument, "%s:%lu: <%s>: %s", c->path, line, el, msg);
  c->failed = 1;
  XML_StopParser(c->p, XML_FALSE);
}

/* Values of the JSON plan a <step> or <copy> becomes (about 19 for a send or receive, more for
 * the fused steps): the limit of elements follows
 * MSCCLPP_PLAN_MAX_VALUES, so that a file the conversion would make too large is refused while it
 * is read, before the conversion allocates by it. */
#define XML_VALUES_PER_ELEM 32

/* Counts one <copy> or <step>; 0 (and the parser stopped) past the limit. */
static int count_elem(struct pctx* c, const char* el) {
  if (c->max_elems <= 0 || ++c->elems <= c->max_elems) return 1;
  fail(c, el, NULL, "more than %ld <step> and <copy> elements (MSCCLPP_PLAN_MAX_VALUES / %d)", c->max_elems,
       XML_VALUES_PER_ELEM);
  return 0;
}

static const char* attr_get(const XML_Char** at, const char* name) {
  for (int i = 0; at[i]; i += 2)
    if (strcmp(at[i], name) == 0) return at[i + 1];
  return NULL;
}

/* Reads integer attribute `name` in [lo, hi] into *out; absent: def when !required. 0 on error. */
static int attr_i64(struct pctx* c, const XML_Char** at, const char* el, const char* name, int64_t lo,
                    int64_t hi, int required, int64_t def, int64_t* out) {
  const char* v = attr_get(at, name);
  if (!v) {
    if (required) fail(c, el, name, "missing");
    *out = def;
    return !required;
  }
  char* end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (end == v || *end != '\0' || errno == ERANGE) {
    fail(c, el, name, "'%s' is not an integer", v);
    return 0;
  }
  if (x < lo || x > hi) {
    fail(c, el, name, "%lld is out of range [%lld, %lld]", x, (long long)lo, (long long)hi);
    return 0;
  }
  *out = x;
  return 1;
}

static int attr_int(struct pctx* c, const XML_Char** at, const char* el, const char* name, int lo, int hi,
                    int required, int def, int* out) {
  int64_t v;
  if (!attr_i64(c, at, el, name, lo, hi, required, def, &v)) return 0;
  *out = (int)v;
  return 1;
}

/* Index of v in names[0..n) or -1 after recording an error listing the accepted values. */
static int attr_enum(struct pctx* c, const char* el, const char* name, const char* v, const char* const* names,
                     int n, const char* accepted) {
  for (int i = 0; i < n; i++)
    if (strcmp(v, names[i]) == 0) return i;
  fail(c, el, name, "'%s' is not one of %s", v, accepted);
  return -1;
}

/* Copies s (UTF-8 from expat) into buf[n], cut before the first character that does not fit whole:
 * a name cut inside a multi-byte character is not UTF-8, which the converted plan's JSON needs. */
static void copy_utf8(char* buf, size_t n, const char* s) {
  size_t len = strlen(s);
  if (len >= n) {
    len = n - 1;
    while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80) len--; /* s[len] continues a character */
  }
  memcpy(buf, s, len);
  buf[len] = '\0';
}

static const char* const kColls[] = {"reduce",  "broadcast", "allreduce", "reducescatter", "allgather", "send",
                                     "recv",    "gather",    "scatter",   "alltoall",      "alltoallv"};

static void start_algo(struct pctx* c, const XML_Char** at) {
  struct xml_algo* a = c->a;
  const char *name = attr_get(at, "name"), *proto = attr_get(at, "proto"), *coll = attr_get(at, "coll");
  copy_utf8(a->name, sizeof(a->name), name ? name : "msccl");
  static const char* const protos[] = {"Simple", "LL", "LL128"};
  if (!proto) { fail(c, "algo", "proto", "missing"); return; }
  if ((a->proto = attr_enum(c, "algo", "proto", proto, protos, 3, "Simple, LL, LL128")) < 0) return;
  if (!coll) { fail(c, "algo", "coll", "missing"); return; }
  if (attr_enum(c, "algo", "coll", coll, kColls, 11, "reduce, broadcast, allreduce, reducescatter, allgather, "
                "send, recv, gather, scatter, alltoall, alltoallv") < 0)
    return;
  snprintf(a->coll, sizeof(a->coll), "%s", coll);
  int outofplace;
  int64_t maxb;
  if (!attr_int(c, at, "algo", "ngpus", 1, XML_MAX_GPUS, 1, 0, &a->ngpus) ||
      !attr_int(c, at, "algo", "nchannels", 1, XML_MAX_CHANNELS, 1, 0, &a->nchannels) ||
      !attr_int(c, at, "algo", "nchunksperloop", 1, XML_MAX_CHUNKS, 1, 0, &a->nchunksperloop) ||
      !attr_int(c, at, "algo", "outofplace", 0, 1, 0, -1, &outofplace) ||
      !attr_int(c, at, "algo", "inplace", 0, 1, outofplace < 0, outofplace < 0 ? 0 : !outofplace, &a->inplace) ||
      !attr_int(c, at, "algo", "nthreads", 32, 1024, 0, 1024, &a->nthreads) ||
      !attr_i64(c, at, "algo", "minBytes", 0, INT64_MAX, 0, 0, (int64_t*)&a->min_bytes) ||
      !attr_i64(c, at, "algo", "maxBytes", 1, INT64_MAX, 0, (int64_t)128 << 20, &maxb))
    return;
  if (outofplace >= 0 && attr_get(at, "inplace") && outofplace == a->inplace)
    { fail(c, "algo", "outofplace", "contradicts inplace=%d", a->inplace); return; }
  a->max_bytes = (uint64_t)maxb;
  if (a->max_bytes <= a->min_bytes)
    { fail(c, "algo", "maxBytes", "%llu is not above minBytes %llu", (unsigned long long)a->max_bytes,
                (unsigned long long)a->min_bytes); return; }
  a->line = (int)XML_GetCurrentLineNumber(c->p);
  a->gpus = calloc((size_t)a->ngpus, sizeof(*a->gpus));
  if (!a->gpus) fail(c, "algo", NULL, "out of memory for %d gpus", a->ngpus);
}

static void start_gpu(struct pctx* c, const XML_Char** at) {
  int id;
  if (!attr_int(c, at, "gpu", "id", 0, c->a->ngpus - 1, 1, 0, &id)) return;
  struct xml_gpu* g = &c->a->gpus[id];
  if (g->seen) { fail(c, "gpu", "id", "%d appears twice (first at line %d)", id, g->line); return; }
  static const char* const names[3] = {"i_chunks", "o_chunks", "s_chunks"};
  for (int b = 0; b < 3; b++)
    if (!attr_int(c, at, "gpu", names[b], 0, XML_MAX_CHUNKS, 1, 0, &g->chunks[b])) return;
  g->id = id, g->seen = 1, g->line = (int)XML_GetCurrentLineNumber(c->p);
  c->gpu = g;
}

static void start_copy(struct pctx* c, const XML_Char** at) {
  struct xml_gpu* g = c->gpu;
  struct xml_copy cp = {0};
  if (!count_elem(c, "copy")) return;
  if (!attr_int(c, at, "copy", "i_off", 0, g->chunks[XML_BUF_I] - 1, 1, 0, &cp.i_off) ||
      !attr_int(c, at, "copy", "o_off", 0, g->chunks[XML_BUF_O] - 1, 1, 0, &cp.o_off) ||
      !attr_int(c, at, "copy", "cnt", 1, XML_MAX_CHUNKS, 0, 1, &cp.cnt))
    return;
  if (cp.i_off + cp.cnt > g->chunks[XML_BUF_I] || cp.o_off + cp.cnt > g->chunks[XML_BUF_O])
    { fail(c, "copy", "cnt", "%d chunks run past i_chunks %d or o_chunks %d", cp.cnt, g->chunks[XML_BUF_I],
                g->chunks[XML_BUF_O]); return; }
  if ((g->ncopies & (g->ncopies - 1)) == 0) { /* 0, 1, 2, 4...: capacity doubles (linear total copying) */
    struct xml_copy* n = realloc(g->copies, (size_t)(g->ncopies ? 2 * g->ncopies : 1) * sizeof(*n));
    if (!n) { fail(c, "copy", NULL, "out of memory"); return; }
    g->copies = n;
  }
  cp.line = (int)XML_GetCurrentLineNumber(c->p);
  g->copies[g->ncopies++] = cp;
}

static void start_tb(struct pctx* c, const XML_Char** at) {
  struct xml_gpu* g = c->gpu;
  struct xml_tb t = {0};
  int n = c->a->ngpus;
  if (g->ntbs >= XML_MAX_TBS) { fail(c, "tb", NULL, "more than %d threadblocks", XML_MAX_TBS); return; }
  if (!attr_int(c, at, "tb", "id", 0, XML_MAX_TBS - 1, 1, 0, &t.id) ||
      !attr_int(c, at, "tb", "send", -1, n - 1, 1, 0, &t.send) ||
      !attr_int(c, at, "tb", "recv", -1, n - 1, 1, 0, &t.recv) ||
      !attr_int(c, at, "tb", "chan", 0, c->a->nchannels - 1, 0, 0, &t.chan))
    return;
  if (t.id != g->ntbs) { fail(c, "tb", "id", "%d, expected %d (ids are dense and in order)", t.id, g->ntbs); return; }
  if (t.send == g->id) { fail(c, "tb", "send", "gpu %d sends to itself", g->id); return; }
  if (t.recv == g->id) { fail(c, "tb", "recv", "gpu %d receives from itself", g->id); return; }
  struct xml_tb* tbs = realloc(g->tbs, (size_t)(g->ntbs + 1) * sizeof(*tbs));
  if (!tbs) { fail(c, "tb", NULL, "out of memory"); return; }
  t.line = (int)XML_GetCurrentLineNumber(c->p);
  g->tbs = tbs, g->tbs[g->ntbs] = t;
  c->tb = &g->tbs[g->ntbs++];
}

static const char* const kSteps[] = {"s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop"};

static int step_buf(struct pctx* c, const XML_Char** at, const char* name, int* out) {
  static const char* const bufs[] = {"i", "o", "s"};
  const char* v = attr_get(at, name);
  if (!v) {
    fail(c, "step", name, "missing");
    return 0;
  }
  return (*out = attr_enum(c, "step", name, v, bufs, 3, "i, o, s")) >= 0;
}

static void start_step(struct pctx* c, const XML_Char** at) {
  struct xml_tb* t = c->tb;
  struct xml_step st = {0};
  const char* type = attr_get(at, "type");
  if (t->nsteps >= XML_MAX_STEPS) { fail(c, "step", NULL, "more than %d steps in a tb", XML_MAX_STEPS); return; }
  if (!count_elem(c, "step")) return;
  if (!attr_int(c, at, "step", "s", 0, XML_MAX_STEPS - 1, 1, 0, &st.s)) return;
  if (st.s != t->nsteps) { fail(c, "step", "s", "%d, expected %d (steps are dense and in order)", st.s, t->nsteps); return; }
  if (!type) { fail(c, "step", "type", "missing"); return; }
  if ((st.type = attr_enum(c, "step", "type", type, kSteps, 9, "s, r, rcs, rrs, rrc, rrcs, cpy, re, nop")) < 0) return;
  if (!step_buf(c, at, "srcbuf", &st.srcbuf) || !step_buf(c, at, "dstbuf", &st.dstbuf) ||
      !attr_int(c, at, "step", "srcoff", 0, XML_MAX_CHUNKS - 1, 1, 0, &st.srcoff) ||
      !attr_int(c, at, "step", "dstoff", 0, XML_MAX_CHUNKS - 1, 1, 0, &st.dstoff) ||
      !attr_int(c, at, "step", "cnt", st.type == XML_STEP_NOP ? 0 : 1, XML_MAX_CHUNKS, 1, 0, &st.cnt) ||
      !attr_int(c, at, "step", "depid", -1, XML_MAX_TBS - 1, 0, -1, &st.depid) ||
      !attr_int(c, at, "step", "deps", -1, XML_MAX_STEPS - 1, 0, -1, &st.deps) ||
      !attr_int(c, at, "step", "hasdep", 0, 1, 0, 0, &st.hasdep))
    return;
  if ((st.depid < 0) != (st.deps < 0)) { fail(c, "step", "deps", "depid and deps must both be -1 or both set"); return; }
  if (xml_step_sends(st.type) && t->send < 0) { fail(c, "step", "type", "'%s' in a tb with send=-1", type); return; }
  if (xml_step_recvs(st.type) && t->recv < 0) { fail(c, "step", "type", "'%s' in a tb with recv=-1", type); return; }
  if (t->nsteps == t->cap) {
    int cap = t->cap ? 2 * t->cap : 8;
    struct xml_step* s = realloc(t->steps, (size_t)cap * sizeof(*s));
    if (!s) { fail(c, "step", NULL, "out of memory"); return; }
    t->steps = s, t->cap = cap;
  }
  st.line = (int)XML_GetCurrentLineNumber(c->p);
  t->steps[t->nsteps++] = st;
}

/* Which element may appear under which: algo > gpu > (copy | tb > step). */
static void on_start(void* ud, const XML_Char* name, const XML_Char** at) {
  struct pctx* c = ud;
  if (c->failed) return;
  int parent = c->depth ? c->stack[c->depth - 1] : EL_NONE, el = EL_NONE;
  if (strcmp(name, "algo") == 0 && parent == EL_NONE && !c->a->gpus) el = EL_ALGO;
  else if (strcmp(name, "gpu") == 0 && parent == EL_ALGO) el = EL_GPU;
  else if (strcmp(name, "copy") == 0 && parent == EL_GPU) el = EL_COPY;
  else if (strcmp(name, "tb") == 0 && parent == EL_GPU) el = EL_TB;
  else if (strcmp(name, "step") == 0 && parent == EL_TB) el = EL_STEP;
  if (el == EL_NONE || c->depth >= MAX_DEPTH)
    { fail(c, name, NULL, "unexpected element here (expected algo > gpu > copy | tb > step, one algo)"); return; }
  c->stack[c->depth++] = el;
  switch (el) {
    case EL_ALGO: start_algo(c, at); break;
    case EL_GPU: start_gpu(c, at); break;
    case EL_COPY: start_copy(c, at); break;
    case EL_TB: start_tb(c, at); break;
    default: start_step(c, at); break;
  }
}

static void on_end(void* ud, const XML_Char* name) {
  struct pctx* c = ud;
  (void)name;
  if (c->failed || c->depth == 0) return;
  int el = c->stack[--c->depth];
  if (el == EL_TB) c->tb = NULL;
  if (el == EL_GPU) c->gpu = NULL;
}

/* Entity declarations (and so entity expansion bombs) are refused. */
static void on_entity(void* ud, const XML_Char* name, int pe, const XML_Char* v, int vlen, const XML_Char* base,
                      const XML_Char* sys, const XML_Char* pub, const XML_Char* nota) {
  (void)pe, (void)v, (void)vlen, (void)base, (void)sys, (void)pub, (void)nota;
  fail(ud, "!ENTITY", NULL, "entity declarations are not allowed (%s)", name);
}

void xml_algo_free(struct xml_algo* a) {
  if (!a) return;
  for (int g = 0; a->gpus && g < a->ngpus; g++) {
    for (int t = 0; t < a->gpus[g].ntbs; t++) free(a->gpus[g].tbs[t].steps);
    free(a->gpus[g].tbs);
    free(a->gpus[g].copies);
  }
  free(a->gpus);
  free(a);
}

static mscclppResult_t run_parser(struct pctx* c, const char* data, size_t len) {
  XML_SetUserData(c->p, c);
  XML_SetElementHandler(c->p, on_start, on_end);
  XML_SetEntityDeclHandler(c->p, on_entity);
  if (len > INT32_MAX) return MPP_ERR(mscclppInvalidArgument, "%s: %zu bytes is too large", c->path, len);
  enum XML_Status st = XML_Parse(c->p, data, (int)len, XML_TRUE);
  if (c->failed) return mscclppInvalidArgument;
  if (st != XML_STATUS_OK)
    return MPP_ERR(mscclppInvalidArgument, "%s:%lu: XML error: %s", c->path,
                   (unsigned long)XML_GetCurrentLineNumber(c->p), XML_ErrorString(XML_GetErrorCode(c->p)));
  if (!c->a->gpus) return MPP_ERR(mscclppInvalidArgument, "%s: no <algo> element", c->path);
  for (int g = 0; g < c->a->ngpus; g++)
    if (!c->a->gpus[g].seen)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: <algo> attribute 'ngpus': %d but <gpu id=\"%d\"> is missing",
                     c->path, c->a->line, c->a->ngpus, g);
  return mscclppSuccess;
}

mscclppResult_t xml_parse_buffer(const char* path, const char* data, size_t len, struct xml_algo** out) {
  if (!path || !data || !out) return MPP_ERR(mscclppInvalidArgument, "xml_parse_buffer: NULL argument");
  *out = NULL;
  struct xml_algo* a = calloc(1, sizeof(*a));
  if (!a) return MPP_ERR(mscclppSystemError, "%s: out of memory", path);
  snprintf(a->path, sizeof(a->path), "%s", path);
  int64_t maxv = param_int(PARAM_PLAN_MAX_VALUES);
  struct pctx c = {.path = path, .a = a, .max_elems = maxv > 0 ? (long)(maxv / XML_VALUES_PER_ELEM) : 0};
  c.p = XML_ParserCreate(NULL);
  if (!c.p) {
    free(a);
    return MPP_ERR(mscclppSystemError, "%s: XML_ParserCreate failed", path);
  }
  mscclppResult_t res = run_parser(&c, data, len);
  XML_ParserFree(c.p);
  if (res == mscclppSuccess) res = xml_check(a);
  if (res != mscclppSuccess) {
    xml_algo_free(a);
    return res;
  }
  *out = a;
  return mscclppSuccess;
}

mscclppResult_t xml_parse_file(const char* path, struct xml_algo** out) {
  if (!path || !out) return MPP_ERR(mscclppInvalidArgument, "xml_parse_file: NULL argument");
  FILE* f = fopen(path, "rb");
  if (!f) return MPP_ERRNO(mscclppInvalidArgument, errno, "cannot open MSCCL XML file %s", path);
  char* buf = NULL;
  size_t len = 0, cap = 0;
  mscclppResult_t res = mscclppSuccess;
  for (;;) {
    if (len == cap) {
      char* n = cap < (64u << 20) ? realloc(buf, cap ? 2 * cap : 65536) : NULL;
      if (!n) {
        res = MPP_ERR(mscclppInvalidArgument, "%s: too large (or out of memory) at %zu bytes", path, len);
        break;
      }
      buf = n, cap = cap ? 2 * cap : 65536;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  if (res == mscclppSuccess && ferror(f)) res = MPP_ERRNO(mscclppSystemError, errno, "reading %s", path);
  fclose(f);
  if (res == mscclppSuccess) res = xml_parse_buffer(path, buf ? buf : "", len, out);
  free(buf);
  return res;
}
