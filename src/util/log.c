/* log.c - the logger behind log.h, and the public log handler hooks. */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <mscclpp/core.h>

static const struct {
  const char* name;
  int bit;
} subsys_names[] = {
    {"init", LOG_SUB_INIT}, {"bootstrap", LOG_SUB_BOOTSTRAP}, {"transport", LOG_SUB_TRANSPORT},
    {"mem", LOG_SUB_MEM},   {"net", LOG_SUB_NET},             {"proxy", LOG_SUB_PROXY},
    {"exec", LOG_SUB_EXEC}, {"algo", LOG_SUB_ALGO},           {"all", LOG_SUB_ALL},
};
static const char* level_names[] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static log_level_t log_level = LOG_WARN;
static int log_subsys = LOG_SUB_ALL;
static FILE* log_file;
static char log_host[64];
static _Atomic(mscclppLogHandler_t) log_handler;
static atomic_int log_rank = -1;
static int log_level_explicit;             /* MSCCLPP_LOG_LEVEL (or MSCCLPP_DEBUG) named a level */
static atomic_int log_error_echo = 1;      /* see log_echo_errors */

static const struct {
  const char* name;
  log_level_t level;
} level_table[] = {{"none", LOG_NONE}, {"error", LOG_ERROR}, {"warn", LOG_WARN},    {"info", LOG_INFO},
                   {"debug", LOG_DEBUG}, {"trace", LOG_TRACE}, {"version", LOG_WARN}, {"abort", LOG_ERROR}};

/* The level a name gives (case-insensitive), or -1 for an unknown name. */
static int parse_level(const char* s) {
  for (size_t i = 0; i < sizeof(level_table) / sizeof(level_table[0]); i++)
    if (strcasecmp(s, level_table[i].name) == 0) return (int)level_table[i].level;
  return -1;
}

/* "a,b,c" -> mask; "^a,b" -> everything but a and b. The first unknown name (if any) is copied to
 * bad (len bytes) and skipped. */
static int parse_subsys(const char* s, char* bad, size_t len) {
  int invert = (s[0] == '^');
  int mask = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", s + invert);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int bit = 0;
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
      if (strcasecmp(tok, subsys_names[i].name) == 0) bit = subsys_names[i].bit;
    if (bit == 0 && !bad[0]) snprintf(bad, len, "%s", tok);
    mask |= bit;
  }
  return invert ? (LOG_SUB_ALL & ~mask) : mask;
}

/* Expands %h and %p in the MSCCLPP_LOG_FILE pattern and opens it for appending. */
static FILE* open_log_file(const char* pattern) {
  char path[512];
  size_t n = 0;
  for (const char* p = pattern; *p && n + 1 < sizeof(path); p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
      int w = (p[1] == 'h') ? snprintf(path + n, sizeof(path) - n, "%s", log_host)
                            : snprintf(path + n, sizeof(path) - n, "%d", (int)getpid());
      if (w > 0) n += (size_t)w;
      if (n >= sizeof(path)) n = sizeof(path) - 1;
      p++;
    } else {
      path[n++] = *p;
    }
  }
  path[n] = '\0';
  FILE* f = fopen(path, "a");
  if (f) setvbuf(f, NULL, _IOLBF, 0);
  return f;
}

/* The first of two environment variables that is set (its name in *which), or NULL. */
static const char* env2(const char* a, const char* b, const char** which) {
  const char* v = getenv(a);
  *which = v ? a : b;
  return v ? v : getenv(b);
}

/* A warning about the logger's own settings, written while log_once runs (log_msg would wait on
 * it): straight to the log file or stderr, in log_msg's layout. */
static void log_init_warn(const char* var, const char* value, const char* valid, const char* used) {
  fprintf(log_file ? log_file : stderr, "%s:%d:%ld [%d] WARN init %s=\"%s\" is not one of %s; using %s\n", log_host,
          (int)getpid(), (long)syscall(SYS_gettid), atomic_load(&log_rank), var, value, valid, used);
}

static void log_init(void) {
  gethostname(log_host, sizeof(log_host) - 1);
  const char *lvar, *svar, *fvar;
  const char* level = env2("MSCCLPP_LOG_LEVEL", "MSCCLPP_DEBUG", &lvar);
  const char* subsys = env2("MSCCLPP_LOG_SUBSYS", "MSCCLPP_DEBUG_SUBSYS", &svar);
  const char* file = env2("MSCCLPP_LOG_FILE", "MSCCLPP_DEBUG_FILE", &fvar);
  if (file && *file) log_file = open_log_file(file);
  int parsed = level && *level ? parse_level(level) : (int)LOG_WARN;
  log_level_explicit = level && *level && parsed >= 0;
  if (parsed >= 0) log_level = (log_level_t)parsed;
  else log_init_warn(lvar, level, "none, error, warn, info, debug, trace (NCCL's VERSION, ABORT too)", "warn");
  if (subsys && *subsys) {
    char bad[64] = "";
    log_subsys = parse_subsys(subsys, bad, sizeof(bad));
    if (bad[0]) log_init_warn(svar, bad, "init, bootstrap, transport, mem, net, proxy, exec, algo, all (a leading ^ excludes)",
                              "the others named");
  }
  if (file && *file && !log_file)
    fprintf(stderr, "%s:%d WARN init %s=\"%s\": cannot open it for appending; logging to stderr\n", log_host,
            (int)getpid(), fvar, file);
}

int log_enabled(log_level_t level, int subsys) {
  pthread_once(&log_once, log_init);
  return level != LOG_NONE && level <= log_level && (subsys & log_subsys) != 0;
}

static const char* subsys_name(int subsys) {
  for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
    if (subsys_names[i].bit == subsys) return subsys_names[i].name;
  return "all";
}

void log_msg(log_level_t level, int subsys, const char* fmt, ...) {
  if (!log_enabled(level, subsys)) return;
  if (subsys == LOG_SUB_ALL && level == LOG_WARN && !atomic_load(&log_error_echo) && !log_level_explicit) return;
  char line[1536];
  int n = snprintf(line, sizeof(line), "%s:%d:%ld [%d] %s %s ", log_host, (int)getpid(), (long)syscall(SYS_gettid),
                   atomic_load(&log_rank), level_names[level], subsys_name(subsys));
  if (n < 0 || n >= (int)sizeof(line)) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  va_end(ap);
  mscclppLogHandler_t handler = atomic_load(&log_handler);
  if (handler)
    handler(line);
  else
    mscclppDefaultLogHandler(line);
}

void log_set_rank(int rank) { atomic_store(&log_rank, rank); }

void log_echo_errors(int on) {
  pthread_once(&log_once, log_init); /* the settings are checked (and warned about) now */
  atomic_store(&log_error_echo, on);
}

void mscclppDefaultLogHandler(const char* msg) {
  pthread_once(&log_once, log_init);
  fprintf(log_file ? log_file : stderr, "%s\n", msg);
}

mscclppResult_t mscclppSetLogHandler(mscclppLogHandler_t handler) {
  atomic_store(&log_handler, handler);
  return mscclppSuccess;
}

static pthread_mutex_t log_rate_mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* With log_rate_mu held: starts a new window when the current one is over; returns how many
 * lines were dropped in the window that ended (0 when none or when it is still open). */
static unsigned long long rate_roll(struct log_rate* r, unsigned long long now) {
  if (now - r->window_start_ns < (unsigned long long)LOG_RATE_WINDOW_MS * 1000000ull) return 0;
  unsigned long long dropped = r->dropped;
  r->window_start_ns = now;
  r->lines = 0;
  r->dropped = 0;
  return dropped;
}

static void rate_summary(unsigned long long dropped, const char* what, int subsys) {
  if (dropped)
    log_msg(LOG_WARN, subsys, "%llu more %s not shown (at most %d lines per %d ms)", dropped, what, LOG_RATE_BURST,
            LOG_RATE_WINDOW_MS);
}

void log_limited(struct log_rate* r, log_level_t level, int subsys, const char* what, const char* fmt, ...) {
  if (!log_enabled(level, subsys)) return;
  char what_copy[sizeof(r->what)];
  pthread_mutex_lock(&log_rate_mu);
  unsigned long long dropped = rate_roll(r, mono_ns());
  snprintf(what_copy, sizeof(what_copy), "%s", r->what);
  snprintf(r->what, sizeof(r->what), "%s", what);
  int allowed = r->lines < LOG_RATE_BURST;
  if (allowed) r->lines++;
  else r->dropped++;
  pthread_mutex_unlock(&log_rate_mu);
  rate_summary(dropped, what_copy, subsys);
  if (!allowed) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  log_msg(level, subsys, "%s", line);
}

void log_rate_tick(struct log_rate* r, int subsys) {
  char what[sizeof(r->what)];
  pthread_mutex_lock(&log_rate_mu);
  unsigned long long dropped = r->dropped ? rate_roll(r, mono_ns()) : 0;
  snprintf(what, sizeof(what), "%s", r->what);
  pthread_mutex_unlock(&log_rate_mu);
  rate_summary(dropped, what, subsys);
}
