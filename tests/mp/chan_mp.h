/* chan_mp.h - what the multi-process channel tests share: a CPU-rank communicator from
 * mscclpp-run's environment, exchanging registered buffers with a peer, a byte pattern every rank
 * can recompute, and a clock. */
#ifndef MPP_TESTS_MP_CHAN_MP_H_
#define MPP_TESTS_MP_CHAN_MP_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "transport_mp.h"

/* The communicator and transport names are the transport tests' (transport_mp.h). */
#define cm_init tmp_init
#define cm_transport tmp_transport

/* Sends mine to peer and imports the peer's registration (lower rank first, user tag). */
static inline mscclppRegMem_t cm_swap(mscclppComm_t comm, int rank, int peer, int tag, mscclppRegMem_t mine) {
  unsigned char out[MSCCLPP_REGMEM_BLOB_BYTES], in[MSCCLPP_REGMEM_BLOB_BYTES];
  size_t len = sizeof(out);
  memset(out, 0, sizeof(out));
  CHECK_OK(mscclppRegMemSerialize(mine, out, &len));
  if (rank < peer) {
    CHECK_OK(mscclppBootstrapSend(comm, peer, tag, out, sizeof(out)));
    CHECK_OK(mscclppBootstrapRecv(comm, peer, tag, in, sizeof(in)));
  } else {
    CHECK_OK(mscclppBootstrapRecv(comm, peer, tag, in, sizeof(in)));
    CHECK_OK(mscclppBootstrapSend(comm, peer, tag, out, sizeof(out)));
  }
  mscclppRegMem_t theirs = NULL;
  CHECK_OK(mscclppRegMemDeserialize(comm, in, len, &theirs));
  return theirs;
}

/* The byte `from` writes at index i in round r. */
static inline unsigned char cm_byte(int r, int from, uint64_t i) {
  uint64_t x = (uint64_t)r * 1000003u + (uint64_t)from * 7919u + i * 2654435761u;
  return (unsigned char)(x ^ (x >> 13) ^ (x >> 29));
}

static inline double cm_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif /* MPP_TESTS_MP_CHAN_MP_H_ */
