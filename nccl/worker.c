/* worker.c - a communicator's own thread, for groups that hold the calls of several communicators
 * (ranks driven from one thread): the group's end hands each communicator's part to its worker
 * and runs the first itself. A worker spins a little after each job (the next group's calls
 * usually come within microseconds) and then sleeps on a condition variable. */
#include <stdlib.h>

#include "shim.h"

enum { W_IDLE = 0, W_POSTED = 1, W_DONE = 2, W_QUIT = 3 };

/* How long a worker or a waiter spins before it sleeps (iterations of a relaxed load). */
#define SPIN_ROUNDS 20000

struct shim_worker {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic int state;
  void (*fn)(void*);
  void* arg;
};

/* Waits until state is one of a or b: spins, then sleeps (the setter changes it under mu and
 * broadcasts, so no wake-up is lost). */
static int wait_for(struct shim_worker* w, int a, int b) {
  for (int i = 0; i < SPIN_ROUNDS; i++) {
    int s = atomic_load_explicit(&w->state, memory_order_acquire);
    if (s == a || s == b) return s;
  }
  pthread_mutex_lock(&w->mu);
  int s;
  while ((s = atomic_load_explicit(&w->state, memory_order_acquire)) != a && s != b) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
  return s;
}

/* Sets state under mu and wakes every sleeper. The release store publishes what the setter wrote
 * before (the job, or its result) to the thread that sees the new state. */
static void set_state(struct shim_worker* w, int s) {
  pthread_mutex_lock(&w->mu);
  atomic_store_explicit(&w->state, s, memory_order_release);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void* worker_main(void* arg) {
  struct shim_worker* w = arg;
  while (wait_for(w, W_POSTED, W_QUIT) == W_POSTED) {
    w->fn(w->arg);
    set_state(w, W_DONE);
  }
  return NULL;
}

struct shim_worker* shim_worker_start(void) {
  struct shim_worker* w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  return w;
}

void shim_worker_post(struct shim_worker* w, void (*fn)(void*), void* arg) {
  w->fn = fn, w->arg = arg;
  set_state(w, W_POSTED);
}

void shim_worker_wait(struct shim_worker* w) {
  (void)wait_for(w, W_DONE, W_DONE);
  atomic_store_explicit(&w->state, W_IDLE, memory_order_relaxed);
}

void shim_worker_stop(struct shim_worker* w) {
  if (!w) return;
  set_state(w, W_QUIT);
  pthread_join(w->th, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
}
