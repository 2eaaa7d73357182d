/* prescan.c - one pass over a plan's JSON text, allocating nothing, before jansson builds its tree
 * (about 170 bytes of memory per JSON value): a plan with more values than MSCCLPP_PLAN_MAX_VALUES,
 * more than 1024 gpus, 65536 threadblocks in a gpu or PLAN_MAX_BLOCK_OPS ops in an op list is
 * refused here, so a huge or hostile file costs its own bytes and one linear scan, not gigabytes.
 * Malformed text is left to jansson, which reports it with line and column. */
#include <string.h>

#include "plan/load/lower.h"
#include "util/param.h"

#define SCAN_DEPTH 64 /* deeper nesting is left to jansson (its own limit) and counted as one frame */

enum arr_kind { ARR_OTHER, ARR_GPUS, ARR_TBS, ARR_OPS };

struct frame {
  char is_arr, want_key; /* object: the next string is a key */
  enum arr_kind kind;    /* arrays: what the key under which it opened names */
  enum arr_kind next;    /* objects: the kind of an array opened under the last key */
  size_t n;              /* arrays: elements so far */
};

static enum arr_kind key_kind(const char* k, size_t n) {
  if (n == 4 && memcmp(k, "gpus", 4) == 0) return ARR_GPUS;
  if (n == 12 && memcmp(k, "threadblocks", 12) == 0) return ARR_TBS;
  if (n == 3 && memcmp(k, "ops", 3) == 0) return ARR_OPS;
  return ARR_OTHER;
}

/* Counts a value starting in frame f (NULL at the top); an error when an array passes its limit. */
static mscclppResult_t count_value(const char* name, struct frame* f, size_t* values, size_t max_values) {
  if (++*values > max_values)
    return MPP_ERR(mscclppInvalidArgument, "%s: more than %zu JSON values (MSCCLPP_PLAN_MAX_VALUES); refused before "
                   "parsing", name, max_values);
  if (f == NULL || !f->is_arr) return mscclppSuccess;
  f->n++;
  if (f->kind == ARR_GPUS && f->n > 1024)
    return MPP_ERR(mscclppInvalidArgument, "%s: field 'gpus': more than 1024 entries; 1 to 1024 ranks", name);
  if (f->kind == ARR_TBS && f->n > PLAN_MAX_BLOCKS)
    return MPP_ERR(mscclppInvalidArgument, "%s: field 'threadblocks': more than %d blocks in a gpu; at most %d", name,
                   PLAN_MAX_BLOCKS, PLAN_MAX_BLOCKS);
  if (f->kind == ARR_OPS && f->n > PLAN_MAX_BLOCK_OPS)
    return MPP_ERR(mscclppInvalidArgument, "%s: field 'ops': more than %d ops in one list; at most %d", name,
                   PLAN_MAX_BLOCK_OPS, PLAN_MAX_BLOCK_OPS);
  return mscclppSuccess;
}

/* The end of the string whose opening quote is at s[i] (the index of its closing quote, or len). */
static size_t string_end(const char* s, size_t len, size_t i) {
  for (i++; i < len && s[i] != '"'; i++)
    if (s[i] == '\\') i++;
  return i < len ? i : len;
}

mscclppResult_t plan_prescan(const char* s, size_t len, const char* name) {
  int64_t pv = param_int(PARAM_PLAN_MAX_VALUES);
  size_t max_values = pv > 0 ? (size_t)pv : (size_t)-1, values = 0;
  struct frame st[SCAN_DEPTH];
  int depth = 0, deep = 0; /* deep: levels beyond SCAN_DEPTH, not tracked */
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    struct frame* f = depth > 0 && deep == 0 ? &st[depth - 1] : NULL;
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == ',' || c == ':') {
      if (c == ',' && f && !f->is_arr) f->want_key = 1;
      continue;
    }
    if (c == '}' || c == ']') {
      if (deep > 0) deep--;
      else if (depth > 0) depth--;
      continue;
    }
    if (c == '"' && f && !f->is_arr && f->want_key) { /* a key */
      size_t e = string_end(s, len, i);
      f->next = key_kind(s + i + 1, e - i - 1);
      f->want_key = 0;
      i = e;
      continue;
    }
    MPP_CHECK(count_value(name, f, &values, max_values));
    if (c == '{' || c == '[') {
      if (depth == SCAN_DEPTH || deep > 0) {
        deep++;
        continue;
      }
      enum arr_kind k = f && !f->is_arr ? f->next : ARR_OTHER;
      st[depth++] = (struct frame){.is_arr = c == '[', .want_key = c == '{', .kind = c == '[' ? k : ARR_OTHER};
    } else if (c == '"') {
      i = string_end(s, len, i);
    } else { /* a number or literal: up to the next delimiter */
      while (i + 1 < len && !strchr(" \n\r\t,:]}[{\"", s[i + 1])) i++;
    }
  }
  return mscclppSuccess;
}
