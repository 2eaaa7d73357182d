/* transport_mp.h - what the multi-process tests of registered memory, connections and host
 * semaphores share: a CPU-rank communicator from mscclpp-run's environment, transport names, a
 * byte pattern every rank can recompute, and a replayable random generator. */
#ifndef MPP_TESTS_MP_TRANSPORT_MP_H_
#define MPP_TESTS_MP_TRANSPORT_MP_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "transport/net.h"

/* Creates this rank's communicator as a CPU rank (the same on machines with GPUs), every
 * bootstrap wait bounded by 20 s. */
static inline mscclppComm_t tmp_init(int* rank, int* nranks) {
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = mscclppRankCpu;
  cfg.bootstrapTimeoutMs = 20000;
  mscclppComm_t comm = NULL;
  CHECK_OK(mscclppCommInitFromEnv(&comm, &cfg));
  CHECK_OK(mscclppCommRank(comm, rank));
  CHECK_OK(mscclppCommSize(comm, nranks));
  return comm;
}

/* Exits 77 (skip) with a line saying why when the net transport cannot work here (built without
 * libfabric, or no usable provider), or when MSCCLPP_NET_TRANSPORT is not on (ctest sets it). */
static inline void tmp_need_net(void) {
  char why[512];
  const char* on = getenv("MSCCLPP_NET_TRANSPORT");
  if (on == NULL || strcmp(on, "on") != 0) {
    printf("SKIP: the net transport needs MSCCLPP_NET_TRANSPORT=on\n");
    exit(77);
  }
  if (!net_probe(why, sizeof(why))) {
    printf("SKIP: the net transport cannot work here: %s\n", why);
    exit(77);
  }
}

/* "shm", "tcp", "net", "auto" (also "p2p") -> the transport ("net": skips where it cannot work). */
static inline mscclppTransport_t tmp_transport(const char* name) {
  if (strcmp(name, "shm") == 0) return mscclppTransportSHM;
  if (strcmp(name, "tcp") == 0) return mscclppTransportTCP;
  if (strcmp(name, "net") == 0) {
    tmp_need_net();
    return mscclppTransportNet;
  }
  if (strcmp(name, "p2p") == 0) return mscclppTransportP2P;
  if (strcmp(name, "auto") == 0) return mscclppTransportAuto;
  TEST_FAIL("unknown transport '%s' (shm|tcp|net|p2p|auto)", name);
}

/* The byte that rank `from` writes at index i of its message to rank `to` in round `round`. */
static inline unsigned char tmp_byte(int round, int from, int to, uint64_t i) {
  uint64_t x = (uint64_t)round * 1000003u + (uint64_t)from * 7919u + (uint64_t)to * 104729u + i * 2654435761u;
  return (unsigned char)(x ^ (x >> 13) ^ (x >> 29));
}

/* splitmix64: the same sequence on every rank for the same seed. */
static inline uint64_t tmp_rand(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline double tmp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The library's last error must mention `what`. */
#define CHECK_ERR_MENTIONS(what) \
  CHECK_MSG(strstr(mscclppGetLastError(), (what)) != NULL, "expected '%s' in: %s", (what), mscclppGetLastError())

/* call returns code and the error message mentions what. */
#define EXPECT(call, code, what) \
  do {                           \
    CHECK_RES(call, code);       \
    CHECK_ERR_MENTIONS(what);    \
  } while (0)

/* Rank 1 registers 4 KiB, hands the registration's blob to rank 0 (bootstrap tag `tag`) and releases
 * it; rank 0 gets a handle to it (what rank 1's receiver now refuses) and returns it, rank 1 NULL. */
static inline mscclppRegMem_t tmp_released_reg(mscclppComm_t comm, int rank, int tag) {
  unsigned char blob[MSCCLPP_REGMEM_BLOB_BYTES];
  size_t len = sizeof(blob);
  if (rank == 1) {
    void* extra = malloc(4096);
    mscclppRegMem_t mem;
    CHECK_OK(mscclppRegisterMemory(comm, extra, 4096, &mem));
    CHECK_OK(mscclppRegMemSerialize(mem, blob, &len));
    CHECK_OK(mscclppRegMemRelease(mem));
    free(extra);
    CHECK_OK(mscclppBootstrapSend(comm, 0, tag, blob, sizeof(blob)));
    return NULL;
  }
  CHECK_OK(mscclppBootstrapRecv(comm, 1, tag, blob, sizeof(blob)));
  mscclppRegMem_t gone;
  CHECK_OK(mscclppRegMemDeserialize(comm, blob, sizeof(blob), &gone));
  return gone;
}

#endif /* MPP_TESTS_MP_TRANSPORT_MP_H_ */
