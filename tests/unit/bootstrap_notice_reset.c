/* bootstrap_notice_reset.c - a ring neighbour that goes down sends its notice, then closes with our
 * bytes unread in its socket, so the kernel resets the connection. The notice came first in the
 * stream: after our send has failed with the reset, it must still be read (boot_wait_notice with
 * no grace, as ring.c's ring_fail does before blaming rank+1 itself), past a heartbeat queued
 * before it. Without a notice, that look returns at once; and a neighbour that keeps beating (every
 * 50 ms) does not stretch a 300 ms grace (each heartbeat read must not restart the wait). Loopback
 * TCP, one process, about 0.5 s. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "helpers.h"
#include "util/timeutil.h"

/* A connected loopback TCP pair: *c the connecting end, *a the accepted one. */
static void tcp_pair(int* c, int* a) {
  union sock_addr any = {0}, bound;
  any.sin.sin_family = AF_INET;
  any.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int lfd = -1;
  CHECK_OK(sock_listen(&any, &lfd, &bound));
  CHECK_OK(sock_connect(&bound, time_deadline_ms(5000), c));
  CHECK_OK(sock_accept(lfd, time_deadline_ms(5000), a));
  sock_close(&lfd);
}

/* Sends to fd until the reset shows (bounded); returns the errno of the failed send. */
static int send_until_reset(int fd) {
  uint8_t junk[WIRE_FRAME_BYTES] = {0};
  uint64_t end = time_deadline_ms(5000);
  while (time_left_ms(end) > 0) {
    if (send(fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN && errno != EINTR) return errno;
    usleep(1000);
  }
  return 0;
}

/* Sends a heartbeat to fd every 50 ms for 3 s (or until the socket fails). */
static void* beater(void* arg) {
  int fd = *(int*)arg;
  uint8_t beat[WIRE_FRAME_BYTES];
  boot_notice_encode(&(struct boot_notice){.type = BOOT_NOTICE_BEAT, .rank = 2}, beat);
  for (int i = 0; i < 60 && send(fd, beat, sizeof(beat), MSG_NOSIGNAL) == (ssize_t)sizeof(beat); i++) usleep(50000);
  return NULL;
}

/* A grace of 300 ms ends within 2 s (300 ms plus slack for a loaded machine under ASan) while
 * heartbeats keep arriving; nothing is read as a notice. */
static double grace_under_beats(struct bootstrap* b) {
  int c = -1, a = -1;
  tcp_pair(&c, &a);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, beater, &a) == 0);
  struct boot_notice got = {0};
  double t0 = (double)time_now_ns();
  CHECK_MSG(boot_wait_notice(b, c, 300, &got) == 0, "a heartbeat was taken for a notice");
  double ms = ((double)time_now_ns() - t0) / 1e6;
  CHECK_MSG(ms < 2000, "a 300 ms grace lasted %.0f ms while heartbeats came", ms);
  shutdown(a, SHUT_RDWR); /* the beater's next send fails */
  pthread_join(t, NULL);
  sock_close(&c);
  sock_close(&a);
  return ms;
}

int main(void) {
  struct bootstrap* b = calloc(1, sizeof(*b));
  CHECK(b);
  b->nranks = 4;
  int c = -1, a = -1;
  tcp_pair(&c, &a);
  /* our frame, which the neighbour never reads: its close then resets the connection */
  uint8_t frame[2 * WIRE_FRAME_BYTES] = {1, 2, 3};
  CHECK(send(c, frame, sizeof(frame), MSG_NOSIGNAL) == (ssize_t)sizeof(frame));
  usleep(20000);
  uint8_t beat[WIRE_FRAME_BYTES], note[WIRE_FRAME_BYTES];
  boot_notice_encode(&(struct boot_notice){.type = BOOT_NOTICE_BEAT, .rank = 2}, beat);
  boot_notice_encode(&(struct boot_notice){.type = BOOT_NOTICE_DIED, .rank = 1}, note);
  CHECK(send(a, beat, sizeof(beat), MSG_NOSIGNAL) == (ssize_t)sizeof(beat));
  CHECK(send(a, note, sizeof(note), MSG_NOSIGNAL) == (ssize_t)sizeof(note));
  shutdown(a, SHUT_RDWR); /* as boot_ring_close_with, then the close of destroy */
  close(a);
  int err = send_until_reset(c);
  CHECK_MSG(err == ECONNRESET || err == EPIPE, "the send after the neighbour's close failed with errno %d, not a reset",
            err);
  struct boot_notice got = {0};
  CHECK_MSG(boot_wait_notice(b, c, 0, &got) == 1, "the notice queued before the reset was not read");
  CHECK_MSG(got.type == BOOT_NOTICE_DIED && got.rank == 1, "read notice type %d rank %d, expected DIED rank 1", got.type,
            got.rank);
  sock_close(&c);

  /* nothing queued, the peer still there: no grace means no wait */
  tcp_pair(&c, &a);
  double t0 = (double)time_now_ns();
  CHECK_MSG(boot_wait_notice(b, c, 0, &got) == 0, "a notice was read where none was sent");
  double ms = ((double)time_now_ns() - t0) / 1e6;
  CHECK_MSG(ms < 1000, "a look without grace took %.0f ms", ms);
  sock_close(&c);
  sock_close(&a);
  double beats_ms = grace_under_beats(b);
  free(b);
  printf("bootstrap_notice_reset: the notice before a reset is read (errno %d on send); no grace: %.1f ms; a 300 ms "
         "grace under heartbeats: %.0f ms\n", err, ms, beats_ms);
  return 0;
}
