/* ring_demo: the main job for now. Every rank (GPU ranks where GPUs exist, CPU ranks otherwise)
 * bootstraps from the launcher's environment, registers a receive buffer, connects to its ring
 * neighbours and passes every rank's data once around the ring with write + signal/wait, checking
 * each hop, then times laps of write + signal/wait. Rank 0 prints a short report. Uses only the public API.
 *
 *   mscclpp-run -n 4 example_ring_demo [bytes...]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mscclpp/mscclpp.h>
#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define OK(call)                                                                                       \
  do {                                                                                                 \
    mscclppResult_t r_ = (call);                                                                       \
    if (r_ != mscclppSuccess) {                                                                        \
      fprintf(stderr, "ring_demo: %s failed: %s: %s\n", #call, mscclppGetErrorString(r_), mscclppGetLastError()); \
      exit(1);                                                                                         \
    }                                                                                                  \
  } while (0)

struct ring {
  mscclppComm_t comm;
  int rank, nranks, gpu;
  size_t bytes;
  void *send, *recv; /* local buffers (device memory on GPU ranks) */
  mscclppRegMem_t send_mem, recv_mem, next_recv;
  mscclppConnection_t to_next, to_prev;
  mscclppHostSemaphore_t next_sem, prev_sem;
  unsigned char* host; /* staging for fills and checks */
};

struct report {
  double us_per_hop;
  int errors;
  int transport;
};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static unsigned char pattern(int origin, size_t i) { return (unsigned char)(origin * 131 + i * 7 + (i >> 12)); }

static void* buf_alloc(struct ring* r, size_t bytes) {
  void* p = NULL;
  OK(mscclppMemAlloc(&p, bytes, r->gpu ? mscclppMemCuda : mscclppMemHost));
  return p;
}

/* Copies between host staging and a rank buffer (a device copy on GPU ranks). */
static void buf_copy(struct ring* r, void* dst, const void* src, size_t bytes) {
#if MSCCLPP_HAVE_CUDA
  if (r->gpu) {
    if (cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) != cudaSuccess) {
      fprintf(stderr, "ring_demo: cudaMemcpy failed\n");
      exit(1);
    }
    return;
  }
#endif
  (void)r;
  memcpy(dst, src, bytes);
}

/* Connects to both neighbours in one global order of pairs (lowest pair first), so that no cycle
 * of ranks waits on each other, then swaps receive-buffer blobs and creates semaphores. */
static void ring_connect(struct ring* r) {
  int next = (r->rank + 1) % r->nranks, prev = (r->rank + r->nranks - 1) % r->nranks;
  int lo_next = r->rank < next ? r->rank : next, lo_prev = r->rank < prev ? r->rank : prev;
  int next_first = lo_next < lo_prev || (lo_next == lo_prev && r->rank < next);
  for (int i = 0; i < 2; i++) {
    if ((i == 0) == next_first) {
      OK(mscclppConnectionCreate(r->comm, next, 0, mscclppTransportAuto, &r->to_next));
      OK(mscclppHostSemaphoreCreate(r->comm, r->to_next, &r->next_sem));
    } else {
      OK(mscclppConnectionCreate(r->comm, prev, 0, mscclppTransportAuto, &r->to_prev));
      OK(mscclppHostSemaphoreCreate(r->comm, r->to_prev, &r->prev_sem));
    }
  }
  unsigned char blob[MSCCLPP_REGMEM_BLOB_BYTES];
  size_t len = sizeof(blob);
  OK(mscclppRegMemSerialize(r->recv_mem, blob, &len));
  uint64_t len64 = len;
  OK(mscclppBootstrapSend(r->comm, prev, 1, &len64, sizeof(len64)));
  OK(mscclppBootstrapSend(r->comm, prev, 2, blob, len));
  OK(mscclppBootstrapRecv(r->comm, next, 1, &len64, sizeof(len64)));
  if (len64 > sizeof(blob)) {
    fprintf(stderr, "ring_demo: blob of %llu bytes from rank %d\n", (unsigned long long)len64, next);
    exit(1);
  }
  OK(mscclppBootstrapRecv(r->comm, next, 2, blob, (size_t)len64));
  OK(mscclppRegMemDeserialize(r->comm, blob, (size_t)len64, &r->next_recv));
}

/* Checks the data of one hop: it must be rank (rank-k-1)'s, then forwards it next hop. */
static int check_and_forward(struct ring* r, int k) {
  int errors = 0;
  buf_copy(r, r->host, r->recv, r->bytes);
  int origin = ((r->rank - k - 1) % r->nranks + r->nranks) % r->nranks;
  for (size_t i = 0; i < r->bytes; i++) errors += r->host[i] != pattern(origin, i);
  buf_copy(r, r->send, r->recv, r->bytes);
  return errors;
}

/* One lap: nranks hops. Hop k: wait until next has freed its receive buffer, write my current data
 * there, signal it, wait for prev's data, (check and forward it,) tell prev its buffer is free.
 * Returns the errors found (check != 0) and the lap's time in *us. */
static int ring_lap(struct ring* r, int check, double* us) {
  int errors = 0;
  if (check) {
    for (size_t i = 0; i < r->bytes; i++) r->host[i] = pattern(r->rank, i);
    buf_copy(r, r->send, r->host, r->bytes);
  }
  OK(mscclppBootstrapBarrier(r->comm));
  double t0 = now_us();
  for (int k = 0; k < r->nranks; k++) {
    if (k > 0) OK(mscclppHostSemaphoreWait(r->next_sem, -1)); /* next consumed our previous hop */
    OK(mscclppConnectionWrite(r->to_next, r->next_recv, 0, r->send_mem, 0, r->bytes));
    OK(mscclppHostSemaphoreSignal(r->next_sem));
    OK(mscclppHostSemaphoreWait(r->prev_sem, -1));
    if (check) errors += check_and_forward(r, k);
    OK(mscclppHostSemaphoreSignal(r->prev_sem)); /* our receive buffer is free again */
  }
  OK(mscclppHostSemaphoreWait(r->next_sem, -1));
  *us = now_us() - t0;
  return errors;
}

/* A checked lap (data really travels the whole ring), then timed laps; reports the median. */
static struct report ring_run(struct ring* r) {
  enum { LAPS = 7 };
  struct report rep = {0, 0, 0};
  double us[LAPS], t;
  rep.errors = ring_lap(r, 1, &t);
  for (int i = 0; i < LAPS; i++) ring_lap(r, 0, &us[i]);
  for (int i = 1; i < LAPS; i++) /* insertion sort for the median */
    for (int j = i; j > 0 && us[j] < us[j - 1]; j--) t = us[j], us[j] = us[j - 1], us[j - 1] = t;
  rep.us_per_hop = us[LAPS / 2] / r->nranks;
  mscclppTransport_t tr;
  OK(mscclppConnectionTransport(r->to_next, &tr));
  rep.transport = (int)tr;
  return rep;
}

static const char* transport_name(int t) {
  switch (t) {
    case mscclppTransportP2P: return "cuda-ipc";
    case mscclppTransportSHM: return "shm";
    case mscclppTransportTCP: return "tcp";
    default: return "?";
  }
}

static void ring_setup(struct ring* r, size_t bytes) {
  r->bytes = bytes;
  r->send = buf_alloc(r, bytes);
  r->recv = buf_alloc(r, bytes);
  r->host = malloc(bytes);
  OK(mscclppRegisterMemory(r->comm, r->send, bytes, &r->send_mem));
  OK(mscclppRegisterMemory(r->comm, r->recv, bytes, &r->recv_mem));
  ring_connect(r);
}

static void ring_teardown(struct ring* r) {
  OK(mscclppBootstrapBarrier(r->comm));
  mscclppHostSemaphoreDestroy(r->next_sem);
  mscclppHostSemaphoreDestroy(r->prev_sem);
  mscclppRegMemRelease(r->next_recv);
  mscclppConnectionDestroy(r->to_next);
  mscclppConnectionDestroy(r->to_prev);
  mscclppRegMemRelease(r->send_mem);
  mscclppRegMemRelease(r->recv_mem);
  mscclppMemFree(r->send);
  mscclppMemFree(r->recv);
  free(r->host);
}

int main(int argc, char** argv) {
  size_t sizes[8] = {4096, 1 << 20, 16 << 20};
  int nsizes = 3;
  if (argc > 1) {
    nsizes = argc - 1 > 8 ? 8 : argc - 1;
    for (int i = 0; i < nsizes; i++) sizes[i] = strtoull(argv[i + 1], NULL, 0);
  }
  struct ring r = {0};
  OK(mscclppCommInitFromEnv(&r.comm, NULL));
  OK(mscclppCommRank(r.comm, &r.rank));
  OK(mscclppCommSize(r.comm, &r.nranks));
  mscclppRankKind_t kind;
  OK(mscclppCommRankKind(r.comm, r.rank, &kind));
  r.gpu = kind == mscclppRankGpu;
  if (r.nranks < 2) {
    fprintf(stderr, "ring_demo: needs at least 2 ranks\n");
    return 1;
  }
  if (r.rank == 0)
    printf("ring demo: %d %s ranks\n%10s  %-9s %12s %12s  %s\n", r.nranks, r.gpu ? "GPU" : "CPU", "bytes",
           "transport", "us/hop", "GB/s/hop", "check");
  int failed = 0;
  for (int s = 0; s < nsizes; s++) {
    ring_setup(&r, sizes[s]);
    struct report mine = ring_run(&r);
    struct report* all = calloc((size_t)r.nranks, sizeof(*all));
    all[r.rank] = mine;
    OK(mscclppBootstrapAllGather(r.comm, all, (int)sizeof(*all)));
    double worst = 0;
    int errors = 0;
    for (int i = 0; i < r.nranks; i++) {
      worst = all[i].us_per_hop > worst ? all[i].us_per_hop : worst;
      errors += all[i].errors;
    }
    failed |= errors != 0;
    if (r.rank == 0)
      printf("%10zu  %-9s %12.1f %12.2f  %s\n", sizes[s], transport_name(mine.transport), worst,
             sizes[s] / worst / 1e3, errors ? "WRONG" : "ok");
    free(all);
    ring_teardown(&r);
  }
  if (r.rank == 0) printf("ring demo: %s\n", failed ? "FAILED (wrong bytes received)" : "all data verified");
  OK(mscclppCommDestroy(r.comm));
  return failed;
}
