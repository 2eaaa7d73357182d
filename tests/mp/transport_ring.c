/* A ring pass: rank 0 fills its buffer, writes it to rank 1 and signals; each rank waits for its
 * predecessor, checks every byte, and forwards the message to its successor; rank 0 checks what
 * comes back. Message sizes vary per round (0 and non-multiples of 8 included).
 *
 *   transport_ring TRANSPORT ROUNDS */
#include "transport_mp.h"

#define MAX_BYTES ((1u << 20) + 5)

static uint64_t size_of_round(int round) {
  uint64_t s = (uint64_t)round * 77;
  uint64_t r = tmp_rand(&s);
  return round == 1 ? 0 : round == 2 ? 13 : r % (MAX_BYTES + 1);
}

static void check_message(int rank, int round, const unsigned char* buf, uint64_t size) {
  for (uint64_t i = 0; i < size; i++)
    if (buf[i] != tmp_byte(round, 0, 0, i))
      TEST_FAIL("rank %d round %d: byte %llu of %llu is 0x%02x, expected 0x%02x", rank, round, (unsigned long long)i,
                (unsigned long long)size, buf[i], tmp_byte(round, 0, 0, i));
}

int main(int argc, char** argv) {
  if (argc < 3) TEST_FAIL("usage: %s shm|tcp|auto ROUNDS", argv[0]);
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  if (n < 2) TEST_SKIP("needs 2 ranks");
  mscclppTransport_t t = tmp_transport(argv[1]);
  int rounds = atoi(argv[2]), next = (rank + 1) % n, prev = (rank - 1 + n) % n;
  unsigned char* buf = NULL;
  CHECK_OK(mscclppMemAlloc((void**)&buf, MAX_BYTES, mscclppMemHost));
  mscclppRegisteredMemory reg;
  CHECK_OK(mscclppRegisterBuffer(comm, buf, MAX_BYTES, &reg));
  /* Connections and semaphores in increasing peer order on every rank: no cycle of waits. */
  mscclppConnection_t conn[2] = {NULL, NULL};
  mscclppHostSemaphore_t sem[2] = {NULL, NULL};
  int lo = next < prev ? next : prev, hi = next < prev ? prev : next, peers[2] = {lo, hi};
  for (int i = 0; i < (lo == hi ? 1 : 2); i++) {
    CHECK_OK(mscclppConnectionCreate(comm, peers[i], 0, t, &conn[i]));
    CHECK_OK(mscclppHostSemaphoreCreate(comm, conn[i], &sem[i]));
  }
  int in = prev == lo ? 0 : 1, out = next == lo ? 0 : 1; /* indices of prev's and next's */
  double t0 = tmp_now();
  for (int r = 1; r <= rounds; r++) {
    uint64_t size = size_of_round(r);
    if (rank == 0)
      for (uint64_t i = 0; i < size; i++) buf[i] = tmp_byte(r, 0, 0, i);
    else {
      CHECK_OK(mscclppHostSemaphoreWait(sem[in], 20000));
      check_message(rank, r, buf, size);
    }
    CHECK_OK(mscclppConnectionWrite(conn[out], reg.remote[next], 0, reg.local, 0, size));
    CHECK_OK(mscclppHostSemaphoreSignal(sem[out]));
    if (rank == 0) {
      CHECK_OK(mscclppHostSemaphoreWait(sem[in], 20000));
      check_message(rank, r, buf, size);
    }
  }
  if (rank == 0) printf("transport_ring %s: %d ranks, %d rounds in %.3f s\n", argv[1], n, rounds, tmp_now() - t0);
  for (int i = 0; i < 2; i++)
    if (conn[i]) CHECK_OK(mscclppConnectionFlush(conn[i], -1));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  for (int i = 0; i < 2; i++) {
    if (sem[i]) CHECK_OK(mscclppHostSemaphoreDestroy(sem[i]));
    if (conn[i]) CHECK_OK(mscclppConnectionDestroy(conn[i]));
  }
  CHECK_OK(mscclppRegisteredMemoryRelease(&reg));
  CHECK_OK(mscclppMemFree(buf));
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
