/* pool.c - the executor's threads, kept per communicator: a call hands block b (b >= 1) to worker
 * b-1 and runs block 0 itself; every block runs at the same time (blocks wait for each other).
 * The pool grows to the largest block count seen; a call only takes the lock to hand off. */
#include <stdlib.h>

#include "exec/cpu/cpu.h"
#include "util/err.h"

struct worker {
  struct exec_pool* pool;
  int index;     /* runs block index + 1 */
  uint64_t seen; /* the last hand-off it took (set before the thread starts) */
  pthread_t th;
};

struct exec_pool {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  uint64_t gen;
  int n, finished, stop;
  exec_block_fn fn;
  void* arg;
  int nworkers;
  struct worker** workers;
};

static void* worker_main(void* a) {
  struct worker* w = a;
  struct exec_pool* p = w->pool;
  pthread_mutex_lock(&p->mu);
  uint64_t seen = w->seen;
  for (;;) {
    while (p->gen == seen && !p->stop) pthread_cond_wait(&p->go, &p->mu);
    if (p->stop) break;
    seen = p->gen;
    if (w->index + 1 >= p->n) continue;
    exec_block_fn fn = p->fn;
    void* arg = p->arg;
    pthread_mutex_unlock(&p->mu);
    fn(arg, w->index + 1);
    pthread_mutex_lock(&p->mu);
    if (++p->finished == p->n - 1) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static mscclppResult_t pool_grow(struct exec_pool* p, int want) {
  if (want <= p->nworkers) return mscclppSuccess;
  struct worker** ws = realloc(p->workers, (size_t)want * sizeof(*ws));
  if (!ws) return MPP_ERR(mscclppSystemError, "executor: out of memory for %d threads", want);
  p->workers = ws;
  while (p->nworkers < want) {
    struct worker* w = calloc(1, sizeof(*w));
    if (!w) return MPP_ERR(mscclppSystemError, "executor: out of memory");
    w->pool = p, w->index = p->nworkers;
    w->seen = p->gen; /* the next hand-off (gen + 1) is the first this worker runs */
    int rc = pthread_create(&w->th, NULL, worker_main, w);
    if (rc) {
      free(w);
      return MPP_ERRNO(mscclppSystemError, rc, "executor: thread %d of the pool", p->nworkers);
    }
    p->workers[p->nworkers++] = w;
  }
  return mscclppSuccess;
}

mscclppResult_t exec_pool_run(struct exec_pool** pool, int n, exec_block_fn fn, void* arg) {
  if (!*pool) {
    struct exec_pool* p = calloc(1, sizeof(*p));
    if (!p) return MPP_ERR(mscclppSystemError, "executor: out of memory");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    *pool = p;
  }
  struct exec_pool* p = *pool;
  MPP_CHECK(pool_grow(p, n - 1));
  pthread_mutex_lock(&p->mu);
  p->n = n, p->finished = 0, p->fn = fn, p->arg = arg, p->gen++;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  if (n > 0) fn(arg, 0);
  pthread_mutex_lock(&p->mu);
  while (p->finished < n - 1) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  return mscclppSuccess;
}

void exec_pool_destroy(struct exec_pool* p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nworkers; i++) {
    pthread_join(p->workers[i]->th, NULL);
    free(p->workers[i]);
  }
  free(p->workers);
  pthread_cond_destroy(&p->go), pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
