/* select.c - which algorithm runs a call: MSCCLPP_ALGO, then the tuning table, then the registry's
 * default. Both are read once per process, at the first collective; a bad MSCCLPP_ALGO or table
 * then fails every collective with the same message.
 *
 * The table file: MSCCLPP_ALGO_TABLE when set (it must be readable), else the first readable of
 *   <dir of the library or executable>/../share/mscclpp/algo.tsv   (an installation, the wheel)
 *   <source tree>/tuning/algo.tsv      only while the library or executable runs from inside the
 *                                      build tree it was built in (MSCCLPP_BUILD_TREE)
 * else the tables the library was built with (compiled in: algo_tables_builtin). The source and
 * build trees are the paths CMake compiled into this file; a copy of the library elsewhere never
 * reads the source tree's table. Beside the table (P = dir/algo.tsv), the machine kind's overlay
 * dir/algo.<machine>.tsv is read too when it exists (select.h), its rules first. The files loaded
 * (or the paths tried) are logged at level info, subsystem algo. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/select.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#define MAX_FORCED 32
#define MAX_TABLE_BYTES (1 << 20)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct algo_table table;
static char source[2 * PATH_MAX + 128] = "built-in";
static mscclppResult_t load_res = mscclppSuccess;
static char load_err[1024];
static const struct algo_desc* forced[MAX_FORCED];
static int nforced;

const char* algo_table_source(void) { return source; }

/* Reads a whole file (at most MAX_TABLE_BYTES) into a new NUL-terminated buffer; NULL if unreadable. */
static char* read_file(const char* path) {
  FILE* f = fopen(path, "re");
  if (f == NULL) return NULL;
  char* buf = malloc(MAX_TABLE_BYTES + 1);
  size_t n = buf ? fread(buf, 1, MAX_TABLE_BYTES + 1, f) : 0;
  fclose(f);
  if (buf == NULL || n > MAX_TABLE_BYTES) {
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  return buf;
}

/* Whether dir (a real path) is the build tree or inside it. */
static int in_build_tree(const char* dir) {
#ifdef MSCCLPP_BUILD_TREE
  char tree[PATH_MAX];
  if (realpath(MSCCLPP_BUILD_TREE, tree) == NULL) return 0; /* the build tree is gone */
  size_t n = strlen(tree);
  return strncmp(dir, tree, n) == 0 && (dir[n] == '/' || dir[n] == '\0');
#else
  (void)dir;
  return 0;
#endif
}

/* Candidate paths (see the top of the file) into paths[]; returns how many. */
static int candidates(char paths[2][PATH_MAX]) {
  int n = 0;
  Dl_info info;
  char real[PATH_MAX];
  if (dladdr((void*)&algo_select, &info) == 0 || info.dli_fname == NULL || realpath(info.dli_fname, real) == NULL)
    return 0;
  char* slash = strrchr(real, '/');
  if (slash == NULL || slash - real >= PATH_MAX - 64) return 0; /* room for the suffix */
  *slash = '\0';
  snprintf(paths[n++], PATH_MAX, "%.*s/../share/mscclpp/algo.tsv", PATH_MAX - 64, real);
#ifdef MSCCLPP_SOURCE_TREE
  if (in_build_tree(real)) snprintf(paths[n++], PATH_MAX, "%s/tuning/algo.tsv", MSCCLPP_SOURCE_TREE);
#endif
  return n;
}

/* Parses text (named name) and appends its rules to table. */
static mscclppResult_t append_rules(const char* text, const char* name) {
  static struct algo_table part; /* large: not on the stack; load_once runs once */
  MPP_CHECK(algo_table_parse(text, name, &part));
  if (table.nrules + part.nrules > ALGO_TABLE_MAX_RULES)
    return MPP_ERR(mscclppInvalidArgument, "%s: %d rules with the overlay's %d exceed the limit %d", name, part.nrules,
                   table.nrules, ALGO_TABLE_MAX_RULES);
  memcpy(&table.rules[table.nrules], part.rules, (size_t)part.nrules * sizeof(part.rules[0]));
  table.nrules += part.nrules;
  return mscclppSuccess;
}

/* The overlay path of table path P for machine m: P's ".tsv" replaced by ".<m>.tsv" (P without
 * ".tsv": P + ".<m>.tsv"). */
static void overlay_path(const char* path, const char* m, char* out, size_t len) {
  size_t n = strlen(path);
  if (n >= 4 && strcmp(path + n - 4, ".tsv") == 0) n -= 4;
  snprintf(out, len, "%.*s.%s.tsv", (int)n, path, m);
}

/* Reads the overlay of path for machine m, when there is one, into table (first). */
static mscclppResult_t load_overlay(const char* path, const char* m) {
  if (m[0] == '\0') return mscclppSuccess;
  char opath[PATH_MAX + 64];
  overlay_path(path, m, opath, sizeof(opath));
  char* text = read_file(opath);
  if (text == NULL) return mscclppSuccess;
  mscclppResult_t res = append_rules(text, opath);
  free(text);
  if (res == mscclppSuccess) {
    snprintf(source, sizeof(source), "%.*s + ", PATH_MAX, opath);
    LOG_INFO_(LOG_SUB_ALGO, "collectives: %d selection rules for machine %s from %s", table.nrules, m, opath);
  }
  return res;
}

/* The built-in tables: machine m's, then the generic one. */
static mscclppResult_t load_builtin(const char* m) {
  for (const struct algo_builtin_table* b = algo_tables_builtin; b->machine != NULL; b++)
    if (m[0] != '\0' && strcmp(b->machine, m) == 0) {
      MPP_CHECK(append_rules(b->text, "built-in machine table"));
      snprintf(source, sizeof(source), "built-in algo.%s.tsv + ", m);
    }
  for (const struct algo_builtin_table* b = algo_tables_builtin; b->machine != NULL; b++)
    if (b->machine[0] == '\0') MPP_CHECK(append_rules(b->text, "built-in tuning/algo.tsv"));
  size_t used = strlen(source);
  snprintf(source + used, sizeof(source) - used, "built-in (tuning/ at build time)");
  return mscclppSuccess;
}

static mscclppResult_t load_table(void) {
  const char* want = param_str(PARAM_ALGO_TABLE);
  char m[ALGO_MACHINE_MAX + 1];
  MPP_CHECK(algo_machine(m));
  char paths[2][PATH_MAX];
  int n = 0;
  if (want[0] != '\0') snprintf(paths[n++], PATH_MAX, "%s", want);
  else n = candidates(paths);
  table.nrules = 0;
  source[0] = '\0';
  for (int i = 0; i < n; i++) {
    char* text = read_file(paths[i]);
    if (text == NULL) continue;
    mscclppResult_t res = load_overlay(paths[i], m);
    if (res == mscclppSuccess) res = append_rules(text, paths[i]);
    free(text);
    if (res != mscclppSuccess) return res;
    size_t used = strlen(source);
    snprintf(source + used, sizeof(source) - used, "%.*s", PATH_MAX - 1, paths[i]);
    LOG_INFO_(LOG_SUB_ALGO, "collectives: %d selection rules from %s", table.nrules, source);
    return mscclppSuccess;
  }
  if (want[0] != '\0') return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_ALGO_TABLE=%s cannot be read (or is over 1 MiB)", want);
  /* A copied or statically linked library: the tables it was built with, not no rules at all (the
   * first registered algorithm of each collective is no choice for every size). */
  MPP_CHECK(load_builtin(m));
  LOG_INFO_(LOG_SUB_ALGO, "collectives: no algo.tsv found (tried: %s%s%s); %d rules of the built-in table (%s)",
            n > 0 ? paths[0] : "none", n > 1 ? ", " : "", n > 1 ? paths[1] : "", table.nrules, source);
  return mscclppSuccess;
}

/* Appends every registered name to buf. */
static void list_names(char* buf, size_t len) {
  int n;
  const struct algo_desc* r = algo_registry(&n);
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", r[i].name);
}

static mscclppResult_t parse_forced(void) {
  char list[512], valid[768];
  snprintf(list, sizeof(list), "%s", param_str(PARAM_ALGO));
  int n;
  const struct algo_desc* r = algo_registry(&n);
  char* save = NULL;
  for (char* name = strtok_r(list, ", ", &save); name != NULL; name = strtok_r(NULL, ", ", &save)) {
    const struct algo_desc* d = NULL;
    for (int i = 0; i < n && d == NULL; i++)
      if (strcmp(r[i].name, name) == 0) d = &r[i];
    if (d == NULL) {
      list_names(valid, sizeof(valid));
      return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_ALGO: unknown algorithm '%s'; valid names: %s", name, valid);
    }
    if (nforced == MAX_FORCED) return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_ALGO: more than %d names", MAX_FORCED);
    forced[nforced++] = d;
  }
  return mscclppSuccess;
}

static void load_once(void) {
  load_res = load_table();
  if (load_res == mscclppSuccess) load_res = parse_forced();
  if (load_res != mscclppSuccess) snprintf(load_err, sizeof(load_err), "%s", err_last());
}

int algo_forced(enum algo_coll coll, int kind) {
  pthread_once(&once, load_once);
  for (int i = 0; load_res == mscclppSuccess && i < nforced; i++)
    if (forced[i]->coll == coll && forced[i]->kind == kind) return 1;
  return 0;
}

mscclppResult_t algo_select(enum algo_coll coll, int kind, int nranks, int nhosts, size_t bytes, int dtype,
                            int captured, const struct algo_desc** out) {
  pthread_once(&once, load_once);
  if (load_res != mscclppSuccess) return MPP_ERR(load_res, "%s: %s", algo_coll_name(coll), load_err);
  for (int i = 0; i < nforced; i++)
    if (forced[i]->coll == coll && forced[i]->kind == kind) {
      *out = forced[i];
      return mscclppSuccess;
    }
  *out = algo_table_lookup(&table, coll, kind, nranks, nhosts, bytes, dtype, captured);
  if (*out != NULL) return mscclppSuccess;
  int n;
  const struct algo_desc* r = algo_registry(&n);
  for (int i = 0; i < n && *out == NULL; i++)
    if (r[i].coll == coll && r[i].kind == kind && !r[i].graph_only) *out = &r[i];
  return mscclppSuccess;
}
