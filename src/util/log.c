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

static log_level_t parse_level(const char* s) {
  static const struct {
    const char* name;
    log_level_t level;
  } table[] = {{"none", LOG_NONE}, {"error", LOG_ERROR}, {"warn", LOG_WARN}, {"info", LOG_INFO},
               {"debug", LOG_DEBUG}, {"trace", LOG_TRACE}, {"version", LOG_WARN}, {"abort", LOG_ERROR}};
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
    if (strcasecmp(s, table[i].name) == 0) return table[i].level;
  return LOG_WARN;
}

/* "a,b,c" -> mask; "^a,b" -> everything but a and b. Unknown names are ignored. */
static int parse_subsys(const char* s) {
  int invert = (s[0] == '^');
  int mask = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", s + invert);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
      if (strcasecmp(tok, subsys_names[i].name) == 0) mask |= subsys_names[i].bit;
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

static void log_init(void) {
  gethostname(log_host, sizeof(log_host) - 1);
  const char* level = getenv("MSCCLPP_LOG_LEVEL");
  if (!level) level = getenv("MSCCLPP_DEBUG");
  if (level) log_level = parse_level(level);
  const char* subsys = getenv("MSCCLPP_LOG_SUBSYS");
  if (!subsys) subsys = getenv("MSCCLPP_DEBUG_SUBSYS");
  if (subsys) log_subsys = parse_subsys(subsys);
  const char* file = getenv("MSCCLPP_LOG_FILE");
  if (!file) file = getenv("MSCCLPP_DEBUG_FILE");
  if (file) log_file = open_log_file(file);
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

void mscclppDefaultLogHandler(const char* msg) {
  pthread_once(&log_once, log_init);
  fprintf(log_file ? log_file : stderr, "%s\n", msg);
}

mscclppResult_t mscclppSetLogHandler(mscclppLogHandler_t handler) {
  atomic_store(&log_handler, handler);
  return mscclppSuccess;
}
