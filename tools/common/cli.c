/* cli.c - the shared command-line helpers of the tools (cli.h). */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mscclpp/mscclpp.h>

#include "util/log.h"

/* Writes text indented by `indent` columns after its first line. */
static void print_indented(const char* text, int indent) {
  for (const char* p = text; *p; p++) {
    putchar(*p);
    if (*p == '\n' && p[1]) printf("%*s", indent, "");
  }
}

void cli_print_help(const struct cli_help* h) {
  printf("usage: %s\n", h->usage);
  if (h->about) printf("\n%s\n", h->about);
  if (h->opts && h->opts[0].names) printf("\noptions:\n");
  for (const struct cli_opt* o = h->opts; o && o->names; o++) {
    char left[64];
    snprintf(left, sizeof(left), "%s%s%s", o->names, o->arg ? " " : "", o->arg ? o->arg : "");
    if (strlen(left) > 24) printf("  %s\n  %24s  ", left, "");
    else printf("  %-24s  ", left);
    print_indented(o->help, 28);
    putchar('\n');
  }
  if (h->after) printf("\n%s\n", h->after);
}

static void vline(const char* tool, const char* fmt, va_list ap, const char* tail) {
  char msg[1024];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  fprintf(stderr, "%s: %s%s\n", tool, msg, tail);
}

int cli_usage_error(const char* tool, const char* fmt, ...) {
  char tail[128];
  snprintf(tail, sizeof(tail), " (%s --help lists the options)", tool);
  va_list ap;
  va_start(ap, fmt);
  vline(tool, fmt, ap, tail);
  va_end(ap);
  return 2;
}

int cli_fail(const char* tool, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(tool, fmt, ap, "");
  va_end(ap);
  return 1;
}

/* The power of 1024 a unit names (K, KB, KiB, ... any case; "" and "B": 0), or -1. */
static int unit_power(const char* u) {
  static const char units[] = "KMGT";
  if (*u == '\0' || strcasecmp(u, "b") == 0) return 0;
  const char* at = strchr(units, toupper((unsigned char)u[0]));
  if (at == NULL) return -1;
  const char* rest = u + 1;
  if (*rest == '\0' || strcasecmp(rest, "b") == 0 || strcasecmp(rest, "ib") == 0) return (int)(at - units) + 1;
  return -1;
}

int cli_parse_size(const char* s, uint64_t* out, char* why, size_t len) {
  if (s == NULL || !isdigit((unsigned char)s[0])) {
    snprintf(why, len, "'%s' is not a size (a number of bytes, optionally with K, M, G or T)", s ? s : "");
    return -1;
  }
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  int power = unit_power(end);
  if (power < 0) {
    snprintf(why, len, "'%s' is not a size: '%s' is not a unit (K, M, G, T; KB, KiB, ... alike)", s, end);
    return -1;
  }
  for (int i = 0; i < power && errno == 0; i++) {
    if (v > UINT64_MAX / 1024) errno = ERANGE;
    v *= 1024;
  }
  if (errno != 0) {
    snprintf(why, len, "'%s' is too large a size", s);
    return -1;
  }
  *out = v;
  return 0;
}

int cli_parse_int(const char* s, long long lo, long long hi, long long* out) {
  if (s == NULL || *s == '\0') return -1;
  char* end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int cli_parse_double(const char* s, double* out) {
  if (s == NULL || *s == '\0') return -1;
  char* end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || *end != '\0' || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

void cli_quiet_library_errors(void) { log_echo_errors(0); }

int cli_wants_help(int argc, char** argv) {
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
  return 0;
}

const char* cli_last_error(void) {
  const char* e = mscclppGetLastError();
  const char* colon = strstr(e, ": ");
  if (colon == NULL) return e;
  for (const char* p = e; p < colon; p++) /* "name.c:123" before it: the location */
    if (*p == ' ') return e;
  const char* dot = strchr(e, '.');
  return dot && dot < colon && strchr(dot, ':') < colon ? colon + 2 : e;
}
