/* bootstrap_sealed.c - what an on-path reader of a bootstrap connection sees after the handshake,
 * and what a byte changed in transit does (util/seal.h). 2 ranks under mscclpp-run; rank 0 points
 * its bootstrap's address of rank 1 at a relay (a thread of its own process) before its first send,
 * so its p2p connection to rank 1 runs through the relay, which records every byte rank 0 sends:
 *
 *   read     rank 0 sends a distinctive 32-byte pattern to rank 1 (which must receive it intact);
 *            the recorded bytes (hello, proof, one frame: exactly 64 + 40 + 16 + 32 + 24 bytes)
 *            must hold the frame's clear header but not the pattern, nor any 8 bytes of it;
 *            an allgather of the pattern (over the ring) still gives every rank every slot;
 *   flip     the relay flips one byte of the next message's ciphertext: rank 1's recv must fail
 *            with RemoteError within 2 s (its timeout is 20 s), naming rank 0 and saying the
 *            message failed authentication, never returning altered data; a barrier afterwards
 *            still succeeds on both ranks (the ring is another connection).
 * Bounded: every wait is 20 s at most; it takes well under a second. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>

#include "bootstrap_mp.h"
#include "core/comm.h"

#define CAP 4096
#define TAG_READ 11
#define TAG_FLIP 12
#define FIRST_BYTES (WIRE_HELLO_BYTES + AUTH_PROOF_BYTES + WIRE_FRAME_BYTES + 32 + SEAL_OVERHEAD)
#define FLIP_AT (FIRST_BYTES + WIRE_FRAME_BYTES + 5) /* the second frame's 6th ciphertext byte */

static const uint8_t PATTERN[32] = "SECRET-MR-KEY:0123456789abcdefX";

struct relay {
  int listen_fd;
  union sock_addr to;
  uint8_t up[CAP]; /* what rank 0 sent, as it sent it */
  atomic_size_t nup;
};

/* Forwards what is readable on `from` to `to`; the upstream copy is recorded (and one byte of it
 * flipped on the way). 0 once `from` has ended. */
static int pump(struct relay* r, int from, int to, int upstream) {
  uint8_t buf[CAP];
  ssize_t n = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
  if (n <= 0) return 0;
  if (upstream) {
    size_t at = atomic_load(&r->nup), keep = at + (size_t)n <= CAP ? (size_t)n : CAP - at;
    memcpy(r->up + at, buf, keep);
    if (FLIP_AT >= at && FLIP_AT < at + (size_t)n) buf[FLIP_AT - at] ^= 0x20;
    atomic_store(&r->nup, at + keep);
  }
  return sock_send_all(to, buf, (size_t)n, time_deadline_ms(20000)) == mscclppSuccess;
}

static void* relay_main(void* arg) {
  struct relay* r = arg;
  int a = -1, b = -1;
  CHECK_OK(sock_accept(r->listen_fd, time_deadline_ms(20000), &a));
  CHECK_OK(sock_connect(&r->to, time_deadline_ms(20000), &b));
  double t0 = mp_now();
  for (;;) {
    struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
    CHECK(poll(p, 2, 100) >= 0 || errno == EINTR);
    if (p[0].revents && !pump(r, a, b, 1)) break;
    if (p[1].revents && !pump(r, b, a, 0)) break;
    if (mp_now() - t0 > 20) break;
  }
  close(a);
  close(b);
  return NULL;
}

/* Waits (20 s at most) until the relay recorded n bytes. */
static void wait_recorded(struct relay* r, size_t n) {
  double t0 = mp_now();
  while (atomic_load(&r->nup) < n) {
    CHECK_MSG(mp_now() - t0 < 20, "the relay recorded %zu of %zu bytes in 20 s", atomic_load(&r->nup), n);
    usleep(1000);
  }
}

static void check_unreadable(struct relay* r) {
  size_t n = atomic_load(&r->nup);
  CHECK_MSG(n == FIRST_BYTES, "rank 0 sent %zu bytes on its connection to rank 1, expected %d", n, FIRST_BYTES);
  CHECK_MSG(memcmp(r->up + WIRE_HELLO_BYTES + AUTH_PROOF_BYTES, "MPBF", 4) == 0,
            "the relay did not record the frame where expected");
  for (size_t off = 0; off + 8 <= sizeof(PATTERN); off++)
    CHECK_MSG(!memmem(r->up, n, PATTERN + off, 8), "bytes %zu..%zu of the secret pattern crossed the wire in clear",
              off, off + 7);
}

int main(void) {
  int rank = mp_env_int("MSCCLPP_RANK"), nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(nranks == 2, "run with 2 ranks");
  setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", "20", 0);
  char root[300];
  mp_root(root, sizeof(root));
  mscclppComm_t comm;
  CHECK_OK(mscclppCommInitRank(&comm, nranks, root, rank));
  struct bootstrap* b = comm->boot;
  static struct relay r;
  pthread_t relay;
  if (rank == 0) {
    CHECK_MSG(b->send_fds[1] == -1, "rank 0 already has a connection to rank 1");
    union sock_addr lo, bound;
    CHECK_OK(sock_parse_addr("127.0.0.1:0", &lo));
    CHECK_OK(sock_listen(&lo, &r.listen_fd, &bound));
    r.to = b->addrs[1];
    b->addrs[1] = bound; /* rank 0's first send to rank 1 connects to the relay */
    CHECK(pthread_create(&relay, NULL, relay_main, &r) == 0);
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));

  /* read */
  uint8_t got[32];
  if (rank == 0) CHECK_OK(mscclppBootstrapSend(comm, 1, TAG_READ, PATTERN, sizeof(PATTERN)));
  if (rank == 1) {
    CHECK_OK(mscclppBootstrapRecv(comm, 0, TAG_READ, got, sizeof(got)));
    CHECK_MSG(memcmp(got, PATTERN, sizeof(got)) == 0, "rank 1 received something else than rank 0's pattern");
  }
  uint8_t slots[2][32];
  memcpy(slots[rank], PATTERN, sizeof(PATTERN));
  slots[rank][31] = (uint8_t)rank;
  CHECK_OK(mscclppBootstrapAllGather(comm, slots, (int)sizeof(slots[0])));
  for (int k = 0; k < 2; k++)
    CHECK_MSG(memcmp(slots[k], PATTERN, 31) == 0 && slots[k][31] == k, "allgather: slot %d is wrong", k);
  if (rank == 0) {
    wait_recorded(&r, FIRST_BYTES);
    check_unreadable(&r);
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));

  /* flip */
  if (rank == 0) CHECK_OK(mscclppBootstrapSend(comm, 1, TAG_FLIP, PATTERN, sizeof(PATTERN)));
  if (rank == 1) {
    double t0 = mp_now();
    memset(got, 0, sizeof(got));
    CHECK_RES(mscclppBootstrapRecv(comm, 0, TAG_FLIP, got, sizeof(got)), mscclppRemoteError);
    double took = mp_now() - t0;
    const char* e = mscclppGetLastError();
    CHECK_MSG(strstr(e, "rank 0") && strstr(e, "failed authentication"),
              "the error does not name rank 0 and the failed authentication: %s", e);
    CHECK_MSG(took < 2.0, "the altered message took %.2f s to be refused (limit 2 s)", took);
    for (size_t k = 0; k < sizeof(got); k++) CHECK_MSG(got[k] == 0, "recv wrote data from an altered message");
    printf("rank 1: altered message refused in %.3f s: %s\n", took, e);
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppCommDestroy(comm));
  if (rank == 0) {
    pthread_join(relay, NULL);
    close(r.listen_fd);
    printf("rank 0: %zu bytes recorded, no trace of the pattern\n", (size_t)FIRST_BYTES);
  }
  return 0;
}
