/* log.h - leveled, per-subsystem logging configured from the environment (docs/parameters.md):
 *   MSCCLPP_LOG_LEVEL  none|error|warn|info|debug|trace (default warn); MSCCLPP_DEBUG is accepted
 *                      too, with NCCL's names (VERSION, WARN, INFO, TRACE)
 *   MSCCLPP_LOG_SUBSYS comma list of subsystems (init,bootstrap,transport,mem,net,proxy,exec,algo,
 *                      all); a leading ^ excludes the listed ones. MSCCLPP_DEBUG_SUBSYS is an alias.
 *   MSCCLPP_LOG_FILE   write here instead of stderr; %h becomes the host name, %p the pid.
 * An unknown level or subsystem name is warned about (naming the valid ones) and left out; an
 * unknown level means warn. params.def lists the three for mscclpp-info and docs/parameters.md. */
#ifndef MPP_UTIL_LOG_H_
#define MPP_UTIL_LOG_H_

typedef enum { LOG_NONE = 0, LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG, LOG_TRACE } log_level_t;

enum {
  LOG_SUB_INIT = 1 << 0,
  LOG_SUB_BOOTSTRAP = 1 << 1,
  LOG_SUB_TRANSPORT = 1 << 2,
  LOG_SUB_MEM = 1 << 3,
  LOG_SUB_NET = 1 << 4,
  LOG_SUB_PROXY = 1 << 5,
  LOG_SUB_EXEC = 1 << 6,
  LOG_SUB_ALGO = 1 << 7,
  LOG_SUB_ALL = 0xffff
};

/* True when a message of this level and subsystem would be written (cheap; use before building
 * expensive arguments). */
int log_enabled(log_level_t level, int subsys);

/* Writes one line: "host:pid:tid [rank] LEVEL SUBSYS message". */
void log_msg(log_level_t level, int subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

/* The rank shown in log lines of this process (-1: none yet). */
void log_set_rank(int rank);

/* Whether the WARN line that err_set writes for every recorded error (subsystem "all") is written
 * (default 1). A program that prints mscclppGetLastError() itself passes 0 so that each error
 * shows once; a level the user set in MSCCLPP_LOG_LEVEL (or MSCCLPP_DEBUG) keeps the lines. The
 * logger reads (and warns about) its settings now if it has not yet. */
void log_echo_errors(int on);

/* A rate limit for a warning that strangers can trigger at will (refused connections): at most
 * LOG_RATE_BURST lines per LOG_RATE_WINDOW_MS window; the lines beyond are counted and reported
 * by one summary line ("N more ... not shown") once the window is over, at the next limited line
 * or log_rate_tick. Zero-initialise; any thread may use one (a lock inside log.c guards it). */
#define LOG_RATE_BURST 5
#define LOG_RATE_WINDOW_MS 1000
struct log_rate {
  unsigned long long window_start_ns;
  unsigned lines;
  unsigned long long dropped;
  char what[96]; /* the summary's noun, from the last limited call */
};
/* Writes the line unless r's budget for this window is spent; `what` names the kind of event for
 * the summary (e.g. "refused connections to bootstrap rank 3"). */
void log_limited(struct log_rate* r, log_level_t level, int subsys, const char* what, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Writes the pending summary when r's window is over (call it now and then, e.g. per poll round). */
void log_rate_tick(struct log_rate* r, int subsys);

#define LOG_WARN_(sub, ...) log_msg(LOG_WARN, (sub), __VA_ARGS__)
#define LOG_INFO_(sub, ...)                                           \
  do {                                                                \
    if (log_enabled(LOG_INFO, (sub))) log_msg(LOG_INFO, (sub), __VA_ARGS__); \
  } while (0)
#define LOG_DEBUG_(sub, ...)                                            \
  do {                                                                  \
    if (log_enabled(LOG_DEBUG, (sub))) log_msg(LOG_DEBUG, (sub), __VA_ARGS__); \
  } while (0)
#define LOG_TRACE_(sub, ...)                                            \
  do {                                                                  \
    if (log_enabled(LOG_TRACE, (sub))) log_msg(LOG_TRACE, (sub), __VA_ARGS__); \
  } while (0)

#endif /* MPP_UTIL_LOG_H_ */
