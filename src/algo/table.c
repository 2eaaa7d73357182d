/* table.c - parsing and lookup of the selection table (format in select.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/select.h"
#include "util/err.h"

#define MAX_FIELDS 9

static int coll_by_name(const char* s) {
  for (int c = 0; c < ALGO_COLL_SENDRECV; c++)
    if (strcmp(s, algo_coll_name((enum algo_coll)c)) == 0) return c;
  return -1;
}

/* "*" -> max; else a decimal number with an optional K, M or G suffix. -1 when malformed. */
static int parse_bound(const char* s, uint64_t max, uint64_t* out) {
  if (strcmp(s, "*") == 0) {
    *out = max;
    return 0;
  }
  if (!isdigit((unsigned char)s[0])) return -1;
  errno = 0;
  char* end;
  unsigned long long v = strtoull(s, &end, 10);
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30, end++;
  if (errno != 0 || *end != '\0' || v > max / mult) return -1;
  *out = v * mult;
  return 0;
}

/* The algorithm named s for coll and kind; NULL with *why set otherwise. */
static const struct algo_desc* find_algo(const char* s, enum algo_coll coll, int kind, const char** why) {
  int n;
  const struct algo_desc* r = algo_registry(&n);
  for (int i = 0; i < n; i++) {
    if (strcmp(r[i].name, s) != 0) continue;
    if (r[i].coll != coll) *why = "it implements another collective";
    else if (r[i].kind != kind) *why = "it is for the other rank kind";
    else return &r[i];
    return NULL;
  }
  *why = "no algorithm has that name";
  return NULL;
}

/* "*" -> every datatype; else a comma list of datatype names (s is modified) into a mask; 0 with
 * *bad set to the first unknown name otherwise. */
static uint32_t parse_dtypes(char* s, const char** bad) {
  if (strcmp(s, "*") == 0) return (1u << ELEM_DTYPE_COUNT) - 1;
  uint32_t mask = 0;
  char* save = NULL;
  for (char* tok = strtok_r(s, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    int d = 0;
    while (d < ELEM_DTYPE_COUNT && strcmp(tok, elem_dtype_name(d)) != 0) d++;
    if (d == ELEM_DTYPE_COUNT) {
      *bad = tok;
      return 0;
    }
    mask |= 1u << d;
  }
  if (mask == 0) *bad = s;
  return mask;
}

/* "hosts=N", "hosts=MIN..MAX" (MAX may be '*') into r's host bounds; -1 when malformed. */
static int parse_hosts(const char* s, struct algo_rule* r) {
  char lo[24], hi[24];
  const char* v = s + strlen("hosts=");
  const char* dots = strstr(v, "..");
  size_t nlo = dots ? (size_t)(dots - v) : strlen(v);
  const char* vhi = dots ? dots + 2 : v;
  if (nlo == 0 || nlo >= sizeof(lo) || strlen(vhi) >= sizeof(hi)) return -1;
  memcpy(lo, v, nlo);
  lo[nlo] = '\0';
  snprintf(hi, sizeof(hi), "%s", vhi);
  uint64_t a, b;
  if (strcmp(lo, "*") == 0 || parse_bound(lo, INT32_MAX, &a) != 0 || parse_bound(hi, INT32_MAX, &b) != 0) return -1;
  if (a < 1 || a > b) return -1;
  r->min_hosts = (int64_t)a, r->max_hosts = (int64_t)b;
  return 0;
}

/* The optional fields after the algorithm (f[7], f[8]): a datatype list and a hosts= condition,
 * each at most once, in either order. */
static mscclppResult_t parse_optional(char** f, int nf, const char* name, int line, struct algo_rule* r) {
  const char* bad = NULL;
  char all[] = "*";
  r->dtypes = 0;
  r->min_hosts = 1, r->max_hosts = INT32_MAX;
  int have_hosts = 0;
  for (int i = 7; i < nf; i++) {
    if (strncmp(f[i], "hosts=", 6) == 0) {
      if (have_hosts++)
        return MPP_ERR(mscclppInvalidArgument, "%s:%d: hosts= given twice", name, line);
      if (parse_hosts(f[i], r) != 0)
        return MPP_ERR(mscclppInvalidArgument, "%s:%d: '%s' is not hosts=N, hosts=MIN..MAX or hosts=MIN..* (1 <= MIN <= MAX)",
                       name, line, f[i]);
      continue;
    }
    if (r->dtypes != 0)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: two datatype lists ('%s'); the optional fields are [dtypes] [hosts=MIN..MAX]",
                     name, line, f[i]);
    r->dtypes = parse_dtypes(f[i], &bad);
    if (r->dtypes == 0)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: unknown datatype '%s' (int8 uint8 int32 uint32 int64 uint64 half float "
                     "double bfloat16 f8e4m3 f8e5m2, or *)", name, line, bad);
  }
  if (r->dtypes == 0) r->dtypes = parse_dtypes(all, &bad);
  return mscclppSuccess;
}

/* Parses one rule of nf fields. */
static mscclppResult_t parse_rule(char** f, int nf, const char* name, int line, struct algo_rule* r) {
  if (nf < 7 || nf > 9)
    return MPP_ERR(mscclppInvalidArgument, "%s:%d: %d fields, expected 7 to 9 (collective kind min_ranks max_ranks min_bytes max_bytes algorithm [dtypes] [hosts=MIN..MAX])", name, line, nf);
  int c = coll_by_name(f[0]);
  if (c < 0)
    return MPP_ERR(mscclppInvalidArgument, "%s:%d: unknown collective '%s' (allreduce allgather reducescatter broadcast reduce alltoall)",
                   name, line, f[0]);
  r->coll = (enum algo_coll)c;
  if (strcmp(f[1], "cpu") == 0) r->kind = mscclppRankCpu;
  else if (strcmp(f[1], "gpu") == 0) r->kind = mscclppRankGpu;
  else return MPP_ERR(mscclppInvalidArgument, "%s:%d: kind '%s' is neither cpu nor gpu", name, line, f[1]);
  uint64_t v[4];
  static const char* const what[4] = {"min_ranks", "max_ranks", "min_bytes", "max_bytes"};
  for (int i = 0; i < 4; i++)
    if (parse_bound(f[2 + i], i < 2 ? (uint64_t)INT32_MAX : UINT64_MAX, &v[i]) != 0)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: %s '%s' is not a number, a number with K/M/G, or *", name, line, what[i],
                     f[2 + i]);
  if (v[0] > v[1] || v[2] > v[3])
    return MPP_ERR(mscclppInvalidArgument, "%s:%d: a minimum is above its maximum", name, line);
  r->min_ranks = (int64_t)v[0], r->max_ranks = (int64_t)v[1], r->min_bytes = v[2], r->max_bytes = v[3];
  MPP_CHECK(parse_optional(f, nf, name, line, r));
  const char* why = NULL;
  r->algo = find_algo(f[6], r->coll, r->kind, &why);
  if (r->algo == NULL)
    return MPP_ERR(mscclppInvalidArgument, "%s:%d: algorithm '%s' cannot run %s on %s ranks: %s", name, line, f[6], f[0], f[1],
                   why);
  return mscclppSuccess;
}

/* Splits line (modified) into at most MAX_FIELDS fields, dropping a '#' comment. */
static int split(char* line, char** f) {
  char* hash = strchr(line, '#');
  if (hash) *hash = '\0';
  int n = 0;
  char* save = NULL;
  for (char* tok = strtok_r(line, " \t\r", &save); tok != NULL; tok = strtok_r(NULL, " \t\r", &save))
    if (n < MAX_FIELDS) f[n++] = tok;
    else return MAX_FIELDS + 1;
  return n;
}

mscclppResult_t algo_table_parse(const char* text, const char* name, struct algo_table* t) {
  t->nrules = 0;
  char line[1024];
  int lineno = 0;
  for (const char* p = text; *p != '\0';) {
    const char* eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    lineno++;
    if (len >= sizeof(line)) return MPP_ERR(mscclppInvalidArgument, "%s:%d: line longer than %zu characters", name, lineno, sizeof(line) - 1);
    memcpy(line, p, len);
    line[len] = '\0';
    p += len + (eol != NULL);
    char* f[MAX_FIELDS];
    int nf = split(line, f);
    if (nf == 0) continue;
    if (t->nrules == ALGO_TABLE_MAX_RULES)
      return MPP_ERR(mscclppInvalidArgument, "%s:%d: more than %d rules", name, lineno, ALGO_TABLE_MAX_RULES);
    MPP_CHECK(parse_rule(f, nf, name, lineno, &t->rules[t->nrules]));
    t->nrules++;
  }
  return mscclppSuccess;
}

const struct algo_desc* algo_table_lookup(const struct algo_table* t, enum algo_coll coll, int kind, int nranks,
                                          int nhosts, size_t bytes, int dtype, int captured) {
  uint32_t bit = dtype >= 0 && dtype < ELEM_DTYPE_COUNT ? 1u << dtype : 0;
  for (int i = 0; i < t->nrules; i++) {
    const struct algo_rule* r = &t->rules[i];
    if ((r->algo->graph_only && !captured) || !(r->dtypes & bit)) continue;
    if (nhosts < r->min_hosts || nhosts > r->max_hosts) continue;
    if (r->coll == coll && r->kind == kind && nranks >= r->min_ranks && nranks <= r->max_ranks &&
        (uint64_t)bytes >= r->min_bytes && (uint64_t)bytes <= r->max_bytes)
      return r->algo;
  }
  return NULL;
}
