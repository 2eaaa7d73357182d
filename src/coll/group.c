/* group.c - mscclppGroupStart/End: per-thread queues of the calls made inside a group, run at the
 * outermost GroupEnd (collectives first, in call order, then every send and receive together). The
 * queues keep their memory from group to group, so a steady pattern of groups allocates nothing.
 *
 * A queued call keeps its communicator's handle and serial number, not a pointer into it: at
 * GroupEnd every call's communicator is held again (core/handles.c) before anything runs, so a
 * communicator destroyed (or aborted, or in another thread's use) since the call was queued makes
 * GroupEnd fail naming that call, and none of the group's calls runs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core/comm.h"
#include "util/err.h"

/* The communicator of a queued call: handle and serial, checked again at GroupEnd. */
struct comm_ref {
  struct mscclppComm* comm;
  uint64_t serial;
};

struct coll_op {
  struct comm_ref ref;
  struct algo_comm* ac; /* set at GroupEnd from the live communicator */
  struct algo_args a;
};

struct group_state {
  int depth;
  struct coll_op* colls;
  int ncolls, colls_cap;
  struct p2p_op* p2p;
  struct comm_ref* p2p_refs; /* np2p entries, beside p2p */
  int np2p, p2p_cap, refs_cap;
  struct comm_hold* holds; /* GroupEnd's holds: ncolls + np2p */
  int holds_cap;
};

static pthread_key_t group_key;
static pthread_once_t group_once = PTHREAD_ONCE_INIT;

static void group_free(void* p) {
  struct group_state* g = p;
  free(g->colls);
  free(g->p2p);
  free(g->p2p_refs);
  free(g->holds);
  free(g);
}

static void group_key_init(void) { (void)pthread_key_create(&group_key, group_free); }

/* This thread's group state, made on first use; NULL when out of memory. */
static struct group_state* group_get(void) {
  pthread_once(&group_once, group_key_init);
  struct group_state* g = pthread_getspecific(group_key);
  if (g == NULL && (g = calloc(1, sizeof(*g))) != NULL && pthread_setspecific(group_key, g) != 0) {
    free(g);
    g = NULL;
  }
  return g;
}

int coll_in_group(void) {
  pthread_once(&group_once, group_key_init);
  struct group_state* g = pthread_getspecific(group_key);
  return g != NULL && g->depth > 0;
}

/* Makes room for one more element of size es in *arr (capacity *cap, *n used). */
static int grow(void** arr, int* cap, int n, size_t es) {
  if (n < *cap) return 0;
  int ncap = *cap ? *cap * 2 : 16;
  void* p = realloc(*arr, (size_t)ncap * es);
  if (p == NULL) return -1;
  *arr = p;
  *cap = ncap;
  return 0;
}

mscclppResult_t coll_group_add(struct algo_comm* ac, const struct algo_args* a) {
  struct group_state* g = group_get();
  if (g == NULL || grow((void**)&g->colls, &g->colls_cap, g->ncolls, sizeof(*g->colls)) != 0)
    return MPP_ERR(mscclppSystemError, "group: out of host memory for the queued calls");
  /* ac->comm is held by the calling public function: its serial can be read. */
  g->colls[g->ncolls++] = (struct coll_op){.ref = {ac->comm, ac->comm->serial}, .a = *a};
  return mscclppSuccess;
}

mscclppResult_t coll_group_add_p2p(struct algo_comm* ac, int is_send, void* buf, size_t bytes, int peer, void* stream) {
  struct p2p_op op = {.ac = ac, .is_send = is_send, .peer = peer, .buf = buf, .bytes = bytes, .pred = -1, .stream = stream};
  struct group_state* g = group_get();
  if (g == NULL || g->depth == 0) return coll_dispatch_p2p(&op, 1);
  if (grow((void**)&g->p2p, &g->p2p_cap, g->np2p, sizeof(*g->p2p)) != 0 ||
      grow((void**)&g->p2p_refs, &g->refs_cap, g->np2p, sizeof(*g->p2p_refs)) != 0)
    return MPP_ERR(mscclppSystemError, "group: out of host memory for the queued calls");
  g->p2p_refs[g->np2p] = (struct comm_ref){ac->comm, ac->comm->serial};
  g->p2p[g->np2p++] = op;
  return mscclppSuccess;
}

mscclppResult_t mscclppGroupStart(void) {
  err_clear();
  struct group_state* g = group_get();
  if (g == NULL) return MPP_ERR(mscclppSystemError, "mscclppGroupStart: out of host memory");
  g->depth++;
  return mscclppSuccess;
}

/* Holds the communicator of every queued call (g->holds[0..*nheld)), then refreshes each call's
 * layer state from its live communicator. On failure nothing stays held (*nheld = 0) and the error
 * names the call. */
static mscclppResult_t hold_all(struct group_state* g, int* nheld) {
  *nheld = 0;
  int n = g->ncolls + g->np2p;
  if (n > g->holds_cap) {
    struct comm_hold* h = realloc(g->holds, (size_t)n * sizeof(*h));
    if (h == NULL) return MPP_ERR(mscclppSystemError, "mscclppGroupEnd: out of host memory");
    g->holds = h, g->holds_cap = n;
  }
  mscclppResult_t res = mscclppSuccess;
  int held;
  for (held = 0; held < n; held++) {
    int is_coll = held < g->ncolls;
    const struct comm_ref* r = is_coll ? &g->colls[held].ref : &g->p2p_refs[held - g->ncolls];
    const char* what = is_coll ? algo_coll_name(g->colls[held].a.coll) : g->p2p[held - g->ncolls].is_send ? "mscclppSend" : "mscclppRecv";
    res = comm_hold(r->comm, r->serial, 1, "mscclppGroupEnd", &g->holds[held]);
    struct algo_comm* ac = NULL;
    if (res == mscclppSuccess) res = algo_comm_get(r->comm, &ac);
    if (res != mscclppSuccess) {
      char inner[512];
      snprintf(inner, sizeof(inner), "%s", err_last());
      res = MPP_ERR(res, "mscclppGroupEnd: call %d of the group (%s) cannot run, so none of the group's calls ran: %s",
                    held + 1, what, inner);
      comm_release(&g->holds[held]);
      break;
    } else if (is_coll) {
      g->colls[held].ac = ac;
    } else {
      g->p2p[held - g->ncolls].ac = ac;
    }
  }
  if (res != mscclppSuccess)
    for (int i = 0; i < held; i++) comm_release(&g->holds[i]);
  else
    *nheld = held;
  return res;
}

mscclppResult_t mscclppGroupEnd(void) {
  err_clear();
  struct group_state* g = group_get();
  if (g == NULL || g->depth == 0) return MPP_ERR(mscclppInvalidUsage, "mscclppGroupEnd: no group is open on this thread");
  if (--g->depth > 0) return mscclppSuccess;
  int n = 0;
  mscclppResult_t res = hold_all(g, &n);
  for (int i = 0; i < g->ncolls && res == mscclppSuccess; i++) res = coll_dispatch(g->colls[i].ac, &g->colls[i].a);
  if (res == mscclppSuccess && g->np2p > 0) res = coll_dispatch_p2p(g->p2p, g->np2p);
  for (int i = 0; i < n; i++) comm_release(&g->holds[i]);
  g->ncolls = 0;
  g->np2p = 0;
  return res;
}
