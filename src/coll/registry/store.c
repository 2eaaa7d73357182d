/* store.c - the process-wide registry: entries in registration order under a mutex, and the
 * snapshot collective calls read without locking (see registry.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "coll/registry/registry.h"
#include "core/handle_reg.h"
#include "util/err.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct planreg_entry* g_list[PLANREG_MAX]; /* registration order */
static int g_n;
static int g_next_id = 1;
static uint64_t g_seq;
static mscclppPlanSelector_t g_selector;
static void* g_user;
static struct planreg_snap* _Atomic g_snap;

/* Selection order: higher priority first, then earlier registration. */
static int by_priority(const void* pa, const void* pb) {
  const struct planreg_entry *a = *(struct planreg_entry* const*)pa, *b = *(struct planreg_entry* const*)pb;
  if (a->priority != b->priority) return a->priority > b->priority ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Collective, then selection order. Entries that serve no collective call sort last. */
static int by_coll(const void* pa, const void* pb) {
  const struct planreg_entry *a = *(struct planreg_entry* const*)pa, *b = *(struct planreg_entry* const*)pb;
  unsigned ca = (unsigned)a->coll, cb = (unsigned)b->coll; /* -1 sorts after every collective */
  if (ca != cb) return ca < cb ? -1 : 1;
  return by_priority(pa, pb);
}

/* A snapshot of list[0..n) and the selector (NULL when out of memory). Caller holds g_lock. */
static struct planreg_snap* snap_make(struct planreg_entry* const* list, int n) {
  struct planreg_snap* s = calloc(1, sizeof(*s) + (size_t)(n ? n : 1) * sizeof(s->e[0]));
  if (s == NULL) return NULL;
  s->selector = g_selector, s->user = g_user, s->n = n;
  if (n) memcpy(s->e, list, (size_t)n * sizeof(s->e[0]));
  qsort(s->e, (size_t)n, sizeof(s->e[0]), by_coll);
  for (int i = n - 1; i >= 0; i--) {
    int c = s->e[i]->coll;
    if (c < 0) continue;
    s->start[c] = i;
    s->count[c]++;
  }
  return s;
}

/* Publishes s; the old snapshot is kept (a call in flight may read it). Caller holds g_lock. */
static void snap_publish(struct planreg_snap* s) {
  s->older = atomic_load_explicit(&g_snap, memory_order_relaxed);
  /* Release: a reader that sees s sees its entries and the entries' fields fully written. */
  atomic_store_explicit(&g_snap, s, memory_order_release);
}

const struct planreg_snap* planreg_snapshot(void) {
  /* Acquire: pairs with the release in snap_publish. */
  return atomic_load_explicit(&g_snap, memory_order_acquire);
}

static int holds_plan(const struct planreg_entry* e, mscclppPlan_t p) {
  for (int k = 0; k < PLANREG_NOPS; k++)
    if (p && e->plan[k] == p) return 1;
  return 0;
}

/* InvalidUsage when es[i]'s plan is registered already (or twice in es). Caller holds g_lock. */
static mscclppResult_t check_dups(struct planreg_entry** es, int n) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < g_n; j++)
      if (holds_plan(g_list[j], es[i]->plan[0]))
        return MPP_ERR(mscclppInvalidUsage, "%s: this plan is registered already (id %d)", es[i]->source, g_list[j]->id);
    for (int j = 0; j < i; j++)
      if (holds_plan(es[j], es[i]->plan[0]))
        return MPP_ERR(mscclppInvalidUsage, "%s: the same plan twice in one registration", es[i]->source);
  }
  return mscclppSuccess;
}

static mscclppResult_t add_locked(struct planreg_entry** es, int n, int* ids) {
  if (n > PLANREG_MAX - g_n)
    return MPP_ERR(mscclppInvalidUsage, "plan registry: %d plans registered, %d more would exceed %d", g_n, n,
                   PLANREG_MAX);
  MPP_CHECK(check_dups(es, n));
  for (int i = 0; i < n; i++) {
    g_list[g_n + i] = es[i];
    es[i]->seq = g_seq + (uint64_t)i; /* the snapshot's order needs it; kept only on success */
  }
  struct planreg_snap* s = snap_make(g_list, g_n + n);
  if (s == NULL) return MPP_ERR(mscclppSystemError, "plan registry: out of memory");
  for (int i = 0; i < n; i++) {
    es[i]->id = g_next_id++;
    if (ids) ids[i] = es[i]->id;
  }
  g_seq += (uint64_t)n;
  g_n += n;
  snap_publish(s);
  return mscclppSuccess;
}

mscclppResult_t planreg_add(struct planreg_entry** es, int n, int* ids) {
  if (n <= 0) return mscclppSuccess;
  pthread_mutex_lock(&g_lock);
  mscclppResult_t res = add_locked(es, n, ids);
  /* The registry owns these plans now: mscclppPlanDestroy refuses them (they stay readable). */
  for (int i = 0; i < n && res == mscclppSuccess; i++)
    for (int k = 0; k < PLANREG_NOPS; k++)
      if (es[i]->plan[k] != NULL)
        handle_set_keeper(HANDLE_PLAN, es[i]->plan[k], "the plan registry (mscclppPlanUnregister or "
                          "mscclppPlanRegistryClear destroy it)");
  pthread_mutex_unlock(&g_lock);
  return res;
}

static int in_ids(int id, const int* ids, int n) {
  for (int i = 0; i < n; i++)
    if (ids[i] == id) return 1;
  return 0;
}

mscclppResult_t planreg_remove_ids(const int* ids, int n, int* removed) {
  struct planreg_entry* gone[PLANREG_MAX];
  struct planreg_entry* keep[PLANREG_MAX];
  int ng = 0, nk = 0;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_n; i++) {
    if (in_ids(g_list[i]->id, ids, n)) gone[ng++] = g_list[i];
    else keep[nk++] = g_list[i];
  }
  struct planreg_snap* s = ng ? snap_make(keep, nk) : NULL;
  if (ng && s == NULL) {
    pthread_mutex_unlock(&g_lock);
    return MPP_ERR(mscclppSystemError, "plan registry: out of memory");
  }
  if (ng) {
    memcpy(g_list, keep, (size_t)nk * sizeof(keep[0]));
    g_n = nk;
    snap_publish(s);
  }
  pthread_mutex_unlock(&g_lock);
  for (int i = 0; i < ng; i++) planreg_entry_free(gone[i]);
  if (removed) *removed = ng;
  return mscclppSuccess;
}

void planreg_clear(void) {
  pthread_mutex_lock(&g_lock);
  struct planreg_snap* s = atomic_exchange_explicit(&g_snap, NULL, memory_order_acq_rel);
  int n = g_n;
  struct planreg_entry* all[PLANREG_MAX];
  memcpy(all, g_list, (size_t)n * sizeof(all[0]));
  g_n = 0;
  g_selector = NULL, g_user = NULL;
  pthread_mutex_unlock(&g_lock);
  while (s) {
    struct planreg_snap* older = s->older;
    free(s);
    s = older;
  }
  for (int i = 0; i < n; i++) planreg_entry_free(all[i]);
}

mscclppResult_t planreg_set_selector(mscclppPlanSelector_t selector, void* user) {
  pthread_mutex_lock(&g_lock);
  mscclppPlanSelector_t old_sel = g_selector;
  void* old_user = g_user;
  g_selector = selector, g_user = user;
  struct planreg_snap* s = snap_make(g_list, g_n);
  if (s) snap_publish(s);
  else g_selector = old_sel, g_user = old_user;
  pthread_mutex_unlock(&g_lock);
  return s ? mscclppSuccess : MPP_ERR(mscclppSystemError, "plan registry: out of memory");
}

int planreg_list(int* ids, int max) {
  struct planreg_entry* sorted[PLANREG_MAX];
  pthread_mutex_lock(&g_lock);
  int n = g_n;
  memcpy(sorted, g_list, (size_t)n * sizeof(sorted[0]));
  qsort(sorted, (size_t)n, sizeof(sorted[0]), by_priority);
  for (int i = 0; i < n && i < max; i++) ids[i] = sorted[i]->id;
  pthread_mutex_unlock(&g_lock);
  return n;
}

int planreg_info(int id, mscclppPlanEntryInfo_t* info) {
  int found = 0;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_n && !found; i++) {
    struct planreg_entry* e = g_list[i];
    if (e->id != id) continue;
    found = 1;
    memset(info, 0, sizeof(*info));
    info->id = e->id;
    info->name = e->plan[0]->name;
    info->source = e->source;
    info->collective = e->rule == PLANREG_RULE_MSCCL ? e->xml.coll : e->plan[0]->collective;
    info->msccl = e->rule == PLANREG_RULE_MSCCL;
    info->priority = e->priority, info->ranksPerNode = e->rpn, info->root = e->root;
    info->uses = atomic_load_explicit(&e->uses, memory_order_relaxed);
    info->plan = e->plan[0];
  }
  pthread_mutex_unlock(&g_lock);
  return found;
}
