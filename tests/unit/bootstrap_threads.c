/* bootstrap_threads.c - four ranks as threads of one process (internal API): allgather, barrier,
 * point-to-point FIFO order per (peer, tag), messages that arrive before their recv, sends to
 * self, concurrent senders and receivers of one rank, the size-mismatch error, and abort from
 * another thread unblocking a recv. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "helpers.h"

#define N 4
#define FIFO_MSGS 50
#define CONC_MSGS 200

static mscclppUniqueId id;
static pthread_barrier_t all_done; /* keeps every rank alive until rank 2's abort test is over */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void check_allgather(struct bootstrap* b, int rank) {
  uint64_t v[N];
  for (int iter = 0; iter < 20; iter++) {
    memset(v, 0, sizeof(v));
    v[rank] = (uint64_t)rank * 1000 + (uint64_t)iter;
    CHECK_OK(bootstrap_allgather(b, v, sizeof(uint64_t)));
    for (int r = 0; r < N; r++) CHECK(v[r] == (uint64_t)r * 1000 + (uint64_t)iter);
    CHECK_OK(bootstrap_barrier(b));
  }
}

/* Every rank sends FIFO_MSGS messages with one tag to every peer (and itself), then a few with
 * other tags, all before anyone receives; recvs then take other tags first. */
static void check_fifo(struct bootstrap* b, int rank) {
  for (int p = 0; p < N; p++) {
    for (int i = 0; i < FIFO_MSGS; i++) {
      int v[2] = {rank, i};
      CHECK_OK(bootstrap_send(b, p, 7, v, sizeof(v)));
    }
    int t = 100 + rank;
    CHECK_OK(bootstrap_send(b, p, 8, &t, sizeof(t)));
    CHECK_OK(bootstrap_send(b, p, 9, NULL, 0));
  }
  for (int p = N - 1; p >= 0; p--) {
    int t = 0;
    CHECK_OK(bootstrap_recv(b, p, 9, NULL, 0));
    CHECK_OK(bootstrap_recv(b, p, 8, &t, sizeof(t)));
    CHECK(t == 100 + p);
    for (int i = 0; i < FIFO_MSGS; i++) {
      int v[2];
      CHECK_OK(bootstrap_recv(b, p, 7, v, sizeof(v)));
      CHECK_MSG(v[0] == p && v[1] == i, "rank %d: from %d got (%d,%d), expected (%d,%d)", rank, p, v[0], v[1], p, i);
    }
  }
  CHECK_OK(bootstrap_barrier(b));
}

struct conc {
  struct bootstrap* b;
  int rank, tag, send;
};

static void* conc_main(void* arg) {
  struct conc* c = arg;
  int next = (c->rank + 1) % N, prev = (c->rank + N - 1) % N;
  for (int i = 0; i < CONC_MSGS; i++) {
    int v = i * 10 + c->tag, got = -1;
    if (c->send) {
      CHECK_OK(bootstrap_send(c->b, next, c->tag, &v, sizeof(v)));
    } else {
      CHECK_OK(bootstrap_recv(c->b, prev, c->tag, &got, sizeof(got)));
      CHECK(got == v);
    }
  }
  return NULL;
}

/* Two sender and two receiver threads per rank, on two tags, at once. */
static void check_concurrent(struct bootstrap* b, int rank) {
  pthread_t t[4];
  struct conc c[4];
  for (int i = 0; i < 4; i++) {
    c[i] = (struct conc){.b = b, .rank = rank, .tag = 1 + i % 2, .send = i < 2};
    CHECK(pthread_create(&t[i], NULL, conc_main, &c[i]) == 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  CHECK_OK(bootstrap_barrier(b));
}

static void check_mismatch(struct bootstrap* b, int rank) {
  uint64_t v = 1;
  if (rank == 0) CHECK_OK(bootstrap_send(b, 1, 99, &v, sizeof(v)));
  if (rank == 1) {
    uint32_t small;
    CHECK_RES(bootstrap_recv(b, 0, 99, &small, sizeof(small)), mscclppInvalidUsage);
    const char* e = mscclppGetLastError();
    CHECK_MSG(strstr(e, "tag 99") && strstr(e, "expected 4") && strstr(e, "received 8") && strstr(e, "rank 0"),
              "message: %s", e);
  }
  CHECK_OK(bootstrap_barrier(b));
}

static void* aborter(void* arg) {
  usleep(300000);
  bootstrap_abort(arg);
  return NULL;
}

static void* rank_main(void* arg) {
  int rank = (int)(intptr_t)arg;
  struct bootstrap* b = NULL;
  CHECK_OK(bootstrap_init(&id, rank, N, 20000, &b));
  check_allgather(b, rank);
  check_fifo(b, rank);
  check_concurrent(b, rank);
  check_mismatch(b, rank);
  if (rank == 2) { /* a recv nobody answers, aborted from another thread */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, aborter, b) == 0);
    double t0 = now_s();
    int v;
    CHECK_RES(bootstrap_recv(b, 3, 12345, &v, sizeof(v)), mscclppAborted);
    CHECK_MSG(now_s() - t0 < 5, "abort took %.1f s to unblock recv", now_s() - t0);
    pthread_join(t, NULL);
  }
  pthread_barrier_wait(&all_done);
  bootstrap_destroy(b);
  return NULL;
}

int main(void) {
  CHECK_OK(bootstrap_unique_id(&id));
  pthread_barrier_init(&all_done, NULL, N);
  pthread_t t[N];
  for (int r = 0; r < N; r++) CHECK(pthread_create(&t[r], NULL, rank_main, (void*)(intptr_t)r) == 0);
  for (int r = 0; r < N; r++) pthread_join(t[r], NULL);
  printf("bootstrap_threads: ok\n");
  return 0;
}
