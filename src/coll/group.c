/* group.c - mscclppGroupStart/End: per-thread queues of the calls made inside a group, run at the
 * outermost GroupEnd (collectives first, in call order, then every send and receive together). The
 * queues keep their memory from group to group, so a steady pattern of groups allocates nothing. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "util/err.h"

struct coll_op {
  struct algo_comm* ac;
  struct algo_args a;
};

struct group_state {
  int depth;
  struct coll_op* colls;
  int ncolls, colls_cap;
  struct p2p_op* p2p;
  int np2p, p2p_cap;
};

static pthread_key_t group_key;
static pthread_once_t group_once = PTHREAD_ONCE_INIT;

static void group_free(void* p) {
  struct group_state* g = p;
  free(g->colls);
  free(g->p2p);
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
  g->colls[g->ncolls++] = (struct coll_op){.ac = ac, .a = *a};
  return mscclppSuccess;
}

mscclppResult_t coll_group_add_p2p(struct algo_comm* ac, int is_send, void* buf, size_t bytes, int peer, void* stream) {
  struct p2p_op op = {.ac = ac, .is_send = is_send, .peer = peer, .buf = buf, .bytes = bytes, .pred = -1, .stream = stream};
  struct group_state* g = group_get();
  if (g == NULL || g->depth == 0) return coll_dispatch_p2p(&op, 1);
  if (grow((void**)&g->p2p, &g->p2p_cap, g->np2p, sizeof(*g->p2p)) != 0)
    return MPP_ERR(mscclppSystemError, "group: out of host memory for the queued calls");
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

mscclppResult_t mscclppGroupEnd(void) {
  err_clear();
  struct group_state* g = group_get();
  if (g == NULL || g->depth == 0) return MPP_ERR(mscclppInvalidUsage, "mscclppGroupEnd: no group is open on this thread");
  if (--g->depth > 0) return mscclppSuccess;
  mscclppResult_t res = mscclppSuccess;
  for (int i = 0; i < g->ncolls && res == mscclppSuccess; i++) res = coll_dispatch(g->colls[i].ac, &g->colls[i].a);
  if (res == mscclppSuccess && g->np2p > 0) res = coll_dispatch_p2p(g->p2p, g->np2p);
  g->ncolls = 0;
  g->np2p = 0;
  return res;
}
