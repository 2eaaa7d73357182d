/* param.c - reads params.def's parameters from the environment once, on first use. */
#include "util/param.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

struct param {
  const char* name;
  int is_int;
  int64_t def_int;
  const char* def_str;
  const char* help;
  const char* choices; /* ENUM: "a|b|c"; else NULL */
  int is_set;
  int64_t int_value;
  const char* str_value;
};

static struct param params[PARAM_COUNT] = {
#define PARAM_INT(name, def, help) {#name, 1, (def), "", (help), NULL, 0, 0, NULL},
#define PARAM_STR(name, def, help) {#name, 0, 0, (def), (help), NULL, 0, 0, NULL},
#define PARAM_ENUM(name, def, choices, help) {#name, 0, 0, (def), (help), (choices), 0, 0, NULL},
#include "util/params.def"
#undef PARAM_INT
#undef PARAM_STR
#undef PARAM_ENUM
};

static pthread_once_t params_once = PTHREAD_ONCE_INIT;

/* Whether text is one of choices ("a|b|c"; case-insensitive). */
static int in_choices(const char* text, const char* choices) {
  size_t n = strlen(text);
  for (const char* c = choices; c; c = strchr(c, '|') ? strchr(c, '|') + 1 : NULL) {
    const char* end = strchr(c, '|');
    size_t len = end ? (size_t)(end - c) : strlen(c);
    if (len == n && strncasecmp(c, text, n) == 0) return 1;
  }
  return 0;
}

/* Warns that an ENUM parameter's text is none of its choices, listing them with ", ". */
static void warn_choice(const char* var, const char* text, const char* choices) {
  char list[256];
  size_t k = 0;
  for (const char* c = choices[0] == '|' ? choices + 1 : choices; *c && k + 3 < sizeof(list); c++) {
    if (*c == '|') list[k++] = ',', list[k++] = ' ';
    else list[k++] = *c;
  }
  list[k] = '\0';
  log_msg(LOG_WARN, LOG_SUB_INIT, "%s=\"%s\" is not one of %s%s", var, text, list, choices[0] == '|' ? " (or unset)" : "");
}

/* Parses one parameter's environment variable into its value fields. */
static void param_load(struct param* p) {
  char var[96];
  snprintf(var, sizeof(var), "MSCCLPP_%s", p->name);
  const char* text = getenv(var);
  p->int_value = p->def_int;
  p->str_value = p->def_str;
  if (!text || !*text) return;
  p->is_set = 1;
  p->str_value = text;
  if (p->choices && !in_choices(text, p->choices)) warn_choice(var, text, p->choices);
  if (!p->is_int) return;
  char* end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0') {
    log_msg(LOG_WARN, LOG_SUB_INIT, "%s=\"%s\" is not an integer; using the default %" PRId64, var, text, p->def_int);
    return;
  }
  p->int_value = v;
}

static void params_load(void) {
  for (int i = 0; i < PARAM_COUNT; i++) param_load(&params[i]);
}

int64_t param_int(param_id_t id) {
  pthread_once(&params_once, params_load);
  return params[id].int_value;
}

const char* param_str(param_id_t id) {
  pthread_once(&params_once, params_load);
  return params[id].str_value;
}

const char* param_name(int index) { return params[index].name; }
const char* param_help(int index) { return params[index].help; }

int param_is_set(int index) {
  pthread_once(&params_once, params_load);
  return params[index].is_set;
}

void param_value_text(int index, char* buf, size_t len) {
  pthread_once(&params_once, params_load);
  if (params[index].is_int)
    snprintf(buf, len, "%" PRId64, params[index].int_value);
  else
    snprintf(buf, len, "%s", params[index].str_value);
}

const char* param_kind(int index) { return params[index].is_int ? "int" : params[index].choices ? "enum" : "string"; }
const char* param_choices(int index) { return params[index].choices; }

void param_default_text(int index, char* buf, size_t len) {
  if (params[index].is_int)
    snprintf(buf, len, "%" PRId64, params[index].def_int);
  else
    snprintf(buf, len, "%s", params[index].def_str);
}
