/* bootstrap_squat.c - a process squatting on the master port learns no secret (issue 22, item 2).
 * A thread of this test holds the "host:port" root's port (no rank 0 starts the real root) and
 * answers each rank's hello with a challenge it has to forge. Three ranks (threads, each with
 * bootstrap_init under MSCCLPP_BOOTSTRAP_SECRET) must:
 *   - send nothing but their 64-byte hello: no proof (no MAC) to a root that did not prove the
 *     secret, and neither the secret's text nor the derived secret in any captured byte;
 *   - send hellos that differ (fresh nonces), so nothing recorded can be replayed;
 *   - fail at once (well before their 30 s timeout) with an error that says the root did not prove
 *     the job's secret. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/internal.h"
#include "helpers.h"
#include "util/auth.h"
#include "util/timeutil.h"

#define NR 3
#define SECRET_TEXT "squat-test-secret-5f1d"
#define CAPTURE 256

static int listen_fd;
static uint8_t captured[NR][CAPTURE];
static size_t captured_len[NR];

/* Accepts NR connections; forges a challenge to each hello and records every byte received
 * until the rank hangs up (or 10 s pass). */
static void* squatter(void* arg) {
  (void)arg;
  int fds[NR];
  for (int i = 0; i < NR; i++) {
    CHECK_OK(sock_accept(listen_fd, time_deadline_ms(20000), &fds[i]));
    CHECK_OK(sock_recv_all(fds[i], captured[i], WIRE_HELLO_BYTES, time_deadline_ms(10000)));
    captured_len[i] = WIRE_HELLO_BYTES;
    uint8_t chal[AUTH_CHALLENGE_BYTES] = {0x4d, 0x50, 0x41, 0x43, AUTH_VERSION, 0};
    CHECK_OK(auth_random(chal + 8, sizeof(chal) - 8));
    CHECK_OK(sock_send_all(fds[i], chal, sizeof(chal), time_deadline_ms(10000)));
  }
  for (int i = 0; i < NR; i++) {
    uint64_t end = time_deadline_ms(10000);
    while (captured_len[i] < CAPTURE && time_left_ms(end) > 0) {
      ssize_t n = recv(fds[i], captured[i] + captured_len[i], CAPTURE - captured_len[i], MSG_DONTWAIT);
      if (n == 0) break;
      if (n > 0) captured_len[i] += (size_t)n;
      else usleep(2000);
    }
    close(fds[i]);
  }
  return NULL;
}

struct rank_arg {
  int rank;
  mscclppUniqueId id;
  mscclppResult_t res;
  char msg[512];
  double secs;
};

static void* rank_main(void* arg) {
  struct rank_arg* a = arg;
  struct bootstrap* b = NULL;
  uint64_t t0 = time_now_ns();
  a->res = bootstrap_init(&a->id, a->rank, NR + 1, 30000, &b);
  a->secs = (double)(time_now_ns() - t0) / 1e9;
  snprintf(a->msg, sizeof(a->msg), "%s", mscclppGetLastError());
  if (b) bootstrap_destroy(b);
  return NULL;
}

int main(void) {
  setenv("MSCCLPP_BOOTSTRAP_SECRET", SECRET_TEXT, 1);
  union sock_addr lo, bound;
  memset(&lo, 0, sizeof(lo));
  lo.sin.sin_family = AF_INET;
  lo.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_OK(sock_listen(&lo, &listen_fd, &bound));
  char root[64];
  snprintf(root, sizeof(root), "127.0.0.1:%d", ntohs(bound.sin.sin_port));
  pthread_t sq, t[NR];
  CHECK(pthread_create(&sq, NULL, squatter, NULL) == 0);
  struct rank_arg args[NR];
  for (int i = 0; i < NR; i++) {
    memset(&args[i], 0, sizeof(args[i]));
    args[i].rank = i + 1; /* no rank 0: the squatter holds the port */
    CHECK_OK(bootstrap_id_from_address(root, args[i].rank, &args[i].id));
    CHECK(pthread_create(&t[i], NULL, rank_main, &args[i]) == 0);
  }
  for (int i = 0; i < NR; i++) CHECK(pthread_join(t[i], NULL) == 0);
  CHECK(pthread_join(sq, NULL) == 0);

  uint8_t secret[WIRE_SECRET_BYTES];
  CHECK_OK(wire_secret_from_text(SECRET_TEXT, secret));
  for (int i = 0; i < NR; i++) {
    CHECK_MSG(args[i].res == mscclppRemoteError, "rank %d: init gave %d: %s", args[i].rank, (int)args[i].res, args[i].msg);
    CHECK_MSG(strstr(args[i].msg, "did not prove") != NULL, "rank %d: %s", args[i].rank, args[i].msg);
    /* Slack: the squatter answers at once; 10 s only covers a loaded machine, still far from 30 s. */
    CHECK_MSG(args[i].secs < 10.0, "rank %d took %.1f s to give up", args[i].rank, args[i].secs);
    CHECK_MSG(captured_len[i] == WIRE_HELLO_BYTES, "connection %d sent %zu bytes: more than its hello", i,
              captured_len[i]);
    CHECK(memmem(captured[i], captured_len[i], SECRET_TEXT, strlen(SECRET_TEXT)) == NULL);
    CHECK(memmem(captured[i], captured_len[i], secret, 8) == NULL);
    for (int j = 0; j < i; j++) CHECK_MSG(memcmp(captured[i], captured[j], WIRE_HELLO_BYTES) != 0, "two hellos are equal");
    for (int j = 0; j < i; j++) /* the nonces (bytes 8..23) in particular */
      CHECK(memcmp(captured[i] + 8, captured[j] + 8, WIRE_NONCE_BYTES) != 0);
  }
  close(listen_fd);
  printf("bootstrap_squat: ok\n");
  return 0;
}
