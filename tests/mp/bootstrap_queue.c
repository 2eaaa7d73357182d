/* bootstrap_queue.c - memory for point-to-point messages that nobody has received yet is bounded
 * (issue 22, item 3). Uses the bootstrap directly (internal API), 2 ranks.
 *
 *   bootstrap_queue huge-header  rank 1 opens a p2p connection to rank 0 with a valid hello, sends
 *                                a frame header announcing 4 GiB and then 1 KiB: rank 0's allocated
 *                                memory (VmData) grows by less than 32 MiB (it used to allocate
 *                                4 GiB at once); after rank 1 hangs up, a recv from it fails naming it.
 *   bootstrap_queue unreceived   (MSCCLPP_BOOTSTRAP_QUEUE_BYTES=16 MiB, set by the test) rank 1
 *                                sends four 64 MiB messages with tags rank 0 has not asked for:
 *                                rank 0's memory grows by less than 100 MiB (not 256: back-pressure
 *                                holds rank 1's connection), a recv of another tag fails at once
 *                                naming rank 1 and the tag that fills the queue, and the four are
 *                                then received intact, in order (no loss, no deadlock).
 *   bootstrap_queue try-recv     bootstrap_try_recv: nothing queued gives got = 0 at once (100000
 *                                tries well under a second); rank 1's three messages of one tag
 *                                arrive in order by polling past a queued message of another tag,
 *                                which is not taken, and a size mismatch is an error naming the sizes. */
#include <stdatomic.h>

#include "bootstrap/internal.h"
#include "bootstrap_mp.h"
#include "util/timeutil.h"

#define BIG (64u << 20)
#define NMSG 4

static int rank, nranks;

/* A field of /proc/self/status in KiB: "VmRSS" (resident) or "VmData" (allocated, touched or not). */
static long status_kib(const char* field) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256], fmt[64];
  long kib = -1;
  snprintf(fmt, sizeof(fmt), "%s: %%ld kB", field);
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, fmt, &kib) == 1) break;
  if (f) fclose(f);
  CHECK_MSG(kib > 0, "no %s in /proc/self/status", field);
  return kib;
}
static long rss_kib(void) { return status_kib("VmRSS"); }

static void fill(uint8_t* p, size_t n, int tag) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(tag + i * 7 + (i >> 12));
}

static void huge_header(struct bootstrap* b) {
  if (rank == 1) {
    int fd = -1;
    CHECK_OK(boot_connect_peer(&b->addrs[0], time_deadline_ms(5000), &fd));
    CHECK_OK(boot_send_hello(b, fd, WIRE_KIND_P2P, time_deadline_ms(5000), "rank 0"));
    uint8_t hdr[WIRE_FRAME_BYTES], body[1024] = {0};
    struct wire_frame f = {.tag = 42, .length = WIRE_MAX_PAYLOAD};
    wire_encode_frame(&f, hdr);
    CHECK(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL) == (ssize_t)sizeof(hdr));
    CHECK(send(fd, body, sizeof(body), MSG_NOSIGNAL) == (ssize_t)sizeof(body));
    int v = 0;
    CHECK_OK(bootstrap_recv(b, 0, 1, &v, sizeof(v))); /* rank 0 has measured */
    close(fd);
    CHECK_OK(bootstrap_barrier(b));
    return;
  }
  long before = status_kib("VmData"); /* allocations count even if never touched */
  usleep(1000000);
  long grown = status_kib("VmData") - before;
  printf("huge-header: rank 0 allocated %ld KiB more after a 4 GiB header\n", grown);
  CHECK_MSG(grown < 32 * 1024, "rank 0 allocated %ld KiB more after a 4 GiB frame header", grown);
  int v = 1;
  CHECK_OK(bootstrap_send(b, 1, 1, &v, sizeof(v)));
  uint8_t small[8];
  CHECK_RES(bootstrap_recv(b, 1, 42, small, sizeof(small)), mscclppRemoteError);
  CHECK_MSG(strstr(mscclppGetLastError(), "rank 1") != NULL, "error does not name rank 1: %s", mscclppGetLastError());
  CHECK_OK(bootstrap_barrier(b));
}

static void unreceived(struct bootstrap* b) {
  uint8_t* buf = malloc(BIG);
  uint8_t* want = malloc(BIG);
  CHECK(buf && want);
  if (rank == 1) {
    for (int k = 0; k < NMSG; k++) { /* blocks while rank 0 holds the connection back */
      fill(buf, BIG, 100 + k);
      CHECK_OK(bootstrap_send(b, 0, 100 + k, buf, BIG));
    }
    CHECK_OK(bootstrap_barrier(b));
    free(buf), free(want);
    return;
  }
  long before = rss_kib();
  usleep(2000000); /* rank 1 sends as fast as rank 0 takes: up to the cap */
  long grown = rss_kib() - before;
  printf("unreceived: rank 0 grew by %ld KiB while 256 MiB waited (cap 16 MiB)\n", grown);
  CHECK_MSG(grown < 100 * 1024, "rank 0 grew by %ld KiB with 256 MiB unreceived and a 16 MiB cap", grown);
  double t0 = mp_now();
  int v;
  CHECK_RES(bootstrap_recv(b, 1, 999, &v, sizeof(v)), mscclppInvalidUsage);
  const char* e = mscclppGetLastError();
  CHECK_MSG(strstr(e, "rank 1") && strstr(e, "tag 100") && strstr(e, "MSCCLPP_BOOTSTRAP_QUEUE_BYTES"),
            "the queue-full error does not name the peer, the tag and the setting: %s", e);
  CHECK_MSG(mp_now() - t0 < 2.0, "the queue-full recv took %.1f s", mp_now() - t0);
  for (int k = 0; k < NMSG; k++) {
    CHECK_OK(bootstrap_recv(b, 1, 100 + k, buf, BIG));
    fill(want, BIG, 100 + k);
    CHECK_MSG(memcmp(buf, want, BIG) == 0, "message %d arrived corrupted", k);
  }
  CHECK_OK(bootstrap_barrier(b));
  free(buf), free(want);
}

static void try_recv(struct bootstrap* b) {
  if (rank == 1) {
    CHECK_OK(bootstrap_barrier(b)); /* rank 0 tried an empty queue */
    uint64_t other = 99; /* first: one connection keeps a pair's order, so it is queued before the rest */
    CHECK_OK(bootstrap_send(b, 0, 8, &other, sizeof(other)));
    for (int k = 0; k < 3; k++) CHECK_OK(bootstrap_send(b, 0, 7, &k, sizeof(k)));
    CHECK_OK(bootstrap_barrier(b));
    return;
  }
  int v = -1, got = 1;
  double t0 = mp_now();
  for (int i = 0; i < 100000; i++) {
    CHECK_OK(bootstrap_try_recv(b, 1, 7, &v, sizeof(v), &got));
    CHECK_MSG(!got, "try_recv took a message nobody sent");
  }
  printf("try-recv: 100000 tries of an empty queue in %.3f s\n", mp_now() - t0);
  CHECK_MSG(mp_now() - t0 < 1.0, "100000 tries of an empty queue took %.2f s", mp_now() - t0);
  CHECK_OK(bootstrap_barrier(b));
  for (int k = 0; k < 3; k++) {
    double until = mp_now() + 10.0;
    do CHECK_OK(bootstrap_try_recv(b, 1, 7, &v, sizeof(v), &got));
    while (!got && mp_now() < until);
    CHECK_MSG(got && v == k, "message %d of tag 7: got %d, value %d", k, got, v);
  }
  CHECK_OK(bootstrap_barrier(b));
  CHECK_OK(bootstrap_try_recv(b, 1, 7, &v, sizeof(v), &got)); /* only the tag-8 message is queued */
  CHECK_MSG(!got, "try_recv of tag 7 took the message of tag 8");
  CHECK_RES(bootstrap_try_recv(b, 1, 8, &v, sizeof(v), &got), mscclppInvalidUsage);
  CHECK_MSG(strstr(mscclppGetLastError(), "expected 4 bytes, received 8") != NULL, "size mismatch error: %s",
            mscclppGetLastError());
}

int main(int argc, char** argv) {
  CHECK_MSG(argc == 2, "usage: %s huge-header|unreceived|try-recv", argv[0]);
  rank = mp_env_int("MSCCLPP_RANK");
  nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(nranks == 2, "needs 2 ranks");
  char root[300];
  mp_root(root, sizeof(root));
  mscclppUniqueId id;
  CHECK_OK(bootstrap_id_from_address(root, rank, &id));
  struct bootstrap* b = NULL;
  CHECK_OK(bootstrap_init(&id, rank, nranks, 30000, &b));
  if (strcmp(argv[1], "huge-header") == 0)
    huge_header(b);
  else if (strcmp(argv[1], "unreceived") == 0)
    unreceived(b);
  else if (strcmp(argv[1], "try-recv") == 0)
    try_recv(b);
  else
    TEST_FAIL("unknown mode %s", argv[1]);
  bootstrap_destroy(b);
  if (rank == 0) printf("bootstrap_queue %s: OK\n", argv[1]);
  return 0;
}
