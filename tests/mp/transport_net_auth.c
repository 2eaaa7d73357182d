/* transport_net_auth.c - strangers at the net transport's endpoint (3 ranks, forced net):
 *   rank 1 is rank 0's real peer (a connection, writes and signals);
 *   rank 2 plays a process without the job's secret: its own libfabric endpoint, outside the
 *   communicator, told rank 0's endpoint name and a recorded genuine signal (as a listener on the
 *   path would learn them). It sends signals with a wrong MAC, the recorded one verbatim, unknown
 *   connection ids and short messages, then RMA writes with guessed memory-region keys; as a
 *   control, one write with the real key (a stolen key, docs/net-transport.md) must land, proving
 *   that the stranger did reach the endpoint.
 * Asserts on rank 0: none of the forged signals changed the word, each was counted as refused,
 * the log shows them rate-limited (at most LOG_RATE_BURST lines a second plus summaries), no
 * guessed key wrote a byte; the recorded signal replayed by the real peer is refused too; and the
 * real connection carries data and signals afterwards.
 * Skips (77) where the library has no libfabric or no provider works. */
#include <fcntl.h>
#include <unistd.h>

#if !MPP_TEST_FABRIC
#include <stdio.h>
int main(void) {
  printf("SKIP: transport_net_auth needs libfabric (the library was built without it)\n");
  return 77;
}
#else
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "core/comm.h"
#include "core/connection.h"
#include "core/regmem.h"
#include "transport_mp.h"
#include "util/log.h"

#define BUF 4096
#define WORD 0          /* the signalled word */
#define DATA 64         /* where rank 1 writes data */
#define CONTROL 1024    /* where the stranger's control write (the real key) goes */
#define GUESSED 2048    /* where guessed keys aim */
#define NGUESS 16
#define NBADMAC 20
#define NREPLAY 20
#define NBADID 5
#define NSHORT 2
#define NFORGED (NBADMAC + NREPLAY + NBADID + NSHORT)
#define TAG_INFO 51
#define TAG_DONE 52

/* What rank 0 tells the stranger (and rank 1): its endpoint, a recorded signal, its region. */
struct info {
  uint64_t name_len;
  uint8_t name[64];
  uint8_t sig[64];
  uint64_t key, base; /* the real key: only for the control write */
  char prov[64];
};

/* ---- the stranger: a bare libfabric endpoint -------------------------------------------------- */

struct stranger {
  struct fi_info* info;
  struct fid_fabric* fabric;
  struct fid_domain* domain;
  struct fid_av* av;
  struct fid_cq* cq;
  struct fid_ep* ep;
  struct fid_mr* mr;
  fi_addr_t victim;
  uint8_t buf[128];
};

static void fi_check(int r, const char* what) {
  if (r != 0) TEST_FAIL("stranger: %s failed: %s", what, fi_strerror(r < 0 ? -r : r));
}

static void stranger_open(struct stranger* s, const struct info* in) {
  struct fi_info* h = fi_allocinfo();
  CHECK(h != NULL);
  h->caps = FI_RMA | FI_MSG | FI_WRITE | FI_SEND;
  h->ep_attr->type = FI_EP_RDM;
  h->tx_attr->op_flags = FI_DELIVERY_COMPLETE; /* a completion says whether it landed */
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  h->fabric_attr->prov_name = strdup(in->prov);
  fi_check(fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, h, &s->info), "fi_getinfo");
  fi_freeinfo(h);
  fi_check(fi_fabric(s->info->fabric_attr, &s->fabric, NULL), "fi_fabric");
  fi_check(fi_domain(s->fabric, s->info, &s->domain, NULL), "fi_domain");
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
  fi_check(fi_cq_open(s->domain, &cq_attr, &s->cq, NULL), "fi_cq_open");
  struct fi_av_attr av_attr = {.type = s->info->domain_attr->av_type};
  fi_check(fi_av_open(s->domain, &av_attr, &s->av, NULL), "fi_av_open");
  fi_check(fi_endpoint(s->domain, s->info, &s->ep, NULL), "fi_endpoint");
  fi_check(fi_ep_bind(s->ep, &s->av->fid, 0), "binding the av");
  fi_check(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV), "binding the cq");
  fi_check(fi_enable(s->ep), "fi_enable");
  fi_check(fi_mr_reg(s->domain, s->buf, sizeof(s->buf), FI_SEND | FI_WRITE, 0, 0xabcdef, 0, &s->mr, NULL),
           "fi_mr_reg");
  if (s->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
    fi_check(fi_mr_bind(s->mr, &s->ep->fid, 0), "fi_mr_bind");
    fi_check(fi_mr_enable(s->mr), "fi_mr_enable");
  }
  CHECK_MSG(fi_av_insert(s->av, in->name, 1, &s->victim, 0, NULL) == 1, "stranger: rank 0's name not insertable");
}

/* Waits for the completion of the one operation in flight: 1 success, -1 error, 0 none in 3 s. */
static int stranger_wait(struct stranger* s) {
  double end = tmp_now() + 3.0;
  while (tmp_now() < end) {
    struct fi_cq_entry e;
    ssize_t n = fi_cq_read(s->cq, &e, 1);
    if (n == 1) return 1;
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err;
      memset(&err, 0, sizeof(err));
      (void)fi_cq_readerr(s->cq, &err, 0);
      return -1;
    }
    usleep(100);
  }
  return 0;
}

/* Posts with retries while the provider's queue is full, then waits. */
static int stranger_send(struct stranger* s, const void* msg, size_t len) {
  memcpy(s->buf, msg, len);
  ssize_t r;
  double end = tmp_now() + 3.0;
  while ((r = fi_send(s->ep, s->buf, len, fi_mr_desc(s->mr), s->victim, NULL)) == -FI_EAGAIN && tmp_now() < end)
    (void)fi_cq_read(s->cq, NULL, 0);
  return r == 0 ? stranger_wait(s) : -1;
}

static int stranger_write(struct stranger* s, uint64_t raddr, uint64_t key) {
  memset(s->buf, 0xEE, 8);
  ssize_t r;
  double end = tmp_now() + 3.0;
  while ((r = fi_write(s->ep, s->buf, 8, fi_mr_desc(s->mr), s->victim, raddr, key, NULL)) == -FI_EAGAIN &&
         tmp_now() < end)
    (void)fi_cq_read(s->cq, NULL, 0);
  return r == 0 ? stranger_wait(s) : -1;
}

static void stranger_close(struct stranger* s) {
  fi_close(&s->ep->fid);
  fi_close(&s->mr->fid);
  fi_close(&s->av->fid);
  fi_close(&s->cq->fid);
  fi_close(&s->domain->fid);
  fi_close(&s->fabric->fid);
  fi_freeinfo(s->info);
}

/* Rank 2: forged signals, then guessed keys, then the control write; tells rank 0 it is done. */
static void run_stranger(mscclppComm_t comm) {
  struct info in;
  CHECK_OK(mscclppBootstrapRecv(comm, 0, TAG_INFO, &in, sizeof(in)));
  struct stranger s;
  memset(&s, 0, sizeof(s));
  stranger_open(&s, &in);
  uint8_t msg[64];
  int sent = 0;
  for (int i = 0; i < NBADMAC; i++) { /* the recorded signal with another value and sequence number */
    memcpy(msg, in.sig, 64);
    uint64_t v = 0xdead0000u + (uint64_t)i, seq = 1000 + (uint64_t)i;
    memcpy(msg + 32, &v, 8); /* value (net_sig.h's layout) */
    memcpy(msg + 8, &seq, 8);
    sent += stranger_send(&s, msg, 64) == 1;
  }
  for (int i = 0; i < NREPLAY; i++) sent += stranger_send(&s, in.sig, 64) == 1; /* verbatim */
  for (int i = 0; i < NBADID; i++) {
    memcpy(msg, in.sig, 64);
    uint32_t id = 7 + (uint32_t)i * 1000;
    memcpy(msg + 4, &id, 4);
    sent += stranger_send(&s, msg, 64) == 1;
  }
  for (int i = 0; i < NSHORT; i++) sent += stranger_send(&s, in.sig, 32) == 1; /* the old 32-byte format */
  stranger_close(&s);
  uint64_t base = in.base; /* offset-based providers: 0; else the address (told: generous to the stranger) */
  /* Each guess from a fresh endpoint: after a refused write the provider may fail the stranger's
   * later operations without sending them, which would prove nothing. Keys 0..NGUESS-1: what
   * counters would give (keys used to be 1, 2, ...). */
  int guessed_ok = 0, guessed_err = 0;
  for (uint64_t k = 0; k < NGUESS; k++) {
    stranger_open(&s, &in);
    int r = stranger_write(&s, base + GUESSED + 8 * k, k);
    guessed_ok += r == 1;
    guessed_err += r < 0;
    stranger_close(&s);
  }
  /* The control, last and fresh: the stranger can write with the real key, so the refusals above
   * are the keys' (and, in order on its connection, it lands after them). */
  stranger_open(&s, &in);
  int control = stranger_write(&s, base + CONTROL, in.key);
  stranger_close(&s);
  printf("stranger: %d of %d forged signals delivered; %d guessed keys reported written, %d refused; control write "
         "with the real key: %s\n", sent, NFORGED, guessed_ok, guessed_err, control == 1 ? "landed" : "failed");
  int report[3] = {sent, guessed_ok, control};
  CHECK_OK(mscclppBootstrapSend(comm, 0, TAG_DONE, report, sizeof(report)));
}

/* ---- rank 0 and its real peer ---------------------------------------------------------------- */

static volatile uint64_t* word_of(unsigned char* buf) { return (volatile uint64_t*)(void*)(buf + WORD); }

/* Rank 0: waits (bounded) until its word holds want. */
static void wait_word(unsigned char* buf, uint64_t want, const char* what) {
  double end = tmp_now() + 10.0;
  while (__atomic_load_n(word_of(buf), __ATOMIC_ACQUIRE) != want && tmp_now() < end) usleep(100);
  CHECK_MSG(*word_of(buf) == want, "%s: the word is %#llx, expected %#llx", what, (unsigned long long)*word_of(buf),
            (unsigned long long)want);
}

/* Rank 1: writes 8 bytes of pattern p at DATA, then signals value. */
static void put_and_signal(mscclppConnection_t conn, mscclppRegisteredMemory* reg, unsigned char* buf, int p,
                           uint64_t value) {
  memset(buf + DATA, p, 8);
  CHECK_OK(mscclppConnectionWrite(conn, reg->remote[0], DATA, reg->local, DATA, 8));
  uint64_t v;
  CHECK_OK(mscclppConnectionUpdateAndSync(conn, reg->remote[0], WORD, &v, value));
  CHECK_OK(mscclppConnectionFlush(conn, 10000));
}

/* Counts the lines of path that contain needle. */
static int count_lines(const char* path, const char* needle) {
  FILE* f = fopen(path, "r");
  CHECK(f != NULL);
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof(line), f) != NULL) n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

/* Rank 0: the victim. Returns after every check. */
static void run_victim(mscclppComm_t comm, mscclppConnection_t conn, mscclppRegisteredMemory* reg, unsigned char* buf) {
  wait_word(buf, 1, "the first genuine signal");
  struct info in;
  memset(&in, 0, sizeof(in));
  in.name_len = net_test_name(&comm->tc, in.name);
  CHECK(in.name_len > 0 && in.name_len <= sizeof(in.name));
  CHECK_MSG(net_test_last_signal(&comm->tc, in.sig), "no signal recorded");
  CHECK(net_test_region(&reg->local->t, &in.key, &in.base));
  char why[256];
  CHECK(net_probe(why, sizeof(why)));
  CHECK_MSG(sscanf(why, "provider %63[^,]", in.prov) == 1, "cannot read the provider from '%s'", why);
  /* The log goes to a file while strangers knock, to count its lines (restored before checks). */
  char path[] = "/tmp/transport_net_auth.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  CHECK(saved >= 0 && dup2(fd, 2) == 2);
  unsigned long long refused0 = net_test_refused();
  CHECK_OK(mscclppBootstrapSend(comm, 2, TAG_INFO, &in, sizeof(in)));
  CHECK_OK(mscclppBootstrapSend(comm, 1, TAG_INFO, &in, sizeof(in)));
  int report[3];
  CHECK_OK(mscclppBootstrapRecv(comm, 2, TAG_DONE, report, sizeof(report)));
  double end = tmp_now() + 5.0; /* the control write came last: once it is here, the guesses were handled */
  while (__atomic_load_n(&buf[CONTROL], __ATOMIC_ACQUIRE) != 0xEE && tmp_now() < end) usleep(1000);
  end = tmp_now() + 5.0;
  while (net_test_refused() < refused0 + (unsigned long long)report[0] && tmp_now() < end) usleep(1000);
  unsigned long long refused = net_test_refused() - refused0;
  /* The real peer replays the recorded signal (value 1) from the real source: refused too. */
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppBootstrapBarrier(comm)); /* rank 1 replayed */
  end = tmp_now() + 5.0;
  while (net_test_refused() < refused0 + refused + 1 && tmp_now() < end) usleep(1000);
  unsigned long long replay_refused = net_test_refused() - refused0 - refused;
  fflush(stderr);
  CHECK(dup2(saved, 2) == 2);
  close(saved);
  close(fd);
  int lines = count_lines(path, "refused a signal message"), summaries = count_lines(path, "not shown");
  unlink(path);
  printf("victim: %llu forged signals refused (%d delivered), %d log lines + %d summaries, replay by the peer "
         "refused: %llu\n", refused, report[0], lines, summaries, replay_refused);
  CHECK_MSG(report[0] == NFORGED, "only %d of %d forged signals reached the endpoint", report[0], NFORGED);
  CHECK_MSG(refused == (unsigned long long)NFORGED, "%llu of %d forged signals refused", refused, NFORGED);
  CHECK_MSG(replay_refused == 1, "the real peer's replay was not refused (%llu)", replay_refused);
  CHECK_MSG(lines >= 1 && lines <= 3 * LOG_RATE_BURST, "%d log lines for %d refusals: not rate-limited", lines,
            NFORGED + 1);
  CHECK_MSG(*word_of(buf) == 1, "a forged signal changed the word to %#llx", (unsigned long long)*word_of(buf));
  for (int i = 0; i < NGUESS * 8 && i < BUF - GUESSED; i++)
    CHECK_MSG(buf[GUESSED + i] == 0, "a guessed key wrote byte %d (0x%02x)", i, buf[GUESSED + i]);
  CHECK_MSG(report[1] == 0, "the stranger saw %d guessed-key writes succeed", report[1]);
  CHECK_MSG(report[2] == 1 && buf[CONTROL] == 0xEE, "the control write with the real key did not land: the stranger "
            "never reached the endpoint, so the refusals prove nothing");
  /* The real connection carries on. */
  CHECK_OK(mscclppBootstrapBarrier(comm));
  wait_word(buf, 2, "a genuine signal after the strangers");
  CHECK_MSG(buf[DATA] == 0x22, "data after the strangers: 0x%02x", buf[DATA]);
  (void)conn;
}

/* Rank 1: the real peer. */
static void run_peer(mscclppComm_t comm, mscclppConnection_t conn, mscclppRegisteredMemory* reg, unsigned char* buf) {
  struct info in;
  CHECK_OK(mscclppBootstrapRecv(comm, 0, TAG_INFO, &in, sizeof(in)));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_MSG(net_test_send_raw(&conn->t, in.sig), "replaying the recorded signal failed to send");
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  put_and_signal(conn, reg, buf, 0x22, 2);
}

int main(void) {
  tmp_need_net();
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  CHECK_MSG(n == 3, "transport_net_auth needs 3 ranks, got %d", n);
  unsigned char* buf = calloc(1, BUF);
  CHECK(buf != NULL);
  mscclppRegisteredMemory reg;
  CHECK_OK(mscclppRegisterBuffer(comm, buf, BUF, &reg));
  mscclppConnection_t conn = NULL;
  if (rank < 2) CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 1, mscclppTransportNet, &conn));
  double t0 = tmp_now();
  if (rank == 1) put_and_signal(conn, &reg, buf, 0x11, 1);
  if (rank == 0) run_victim(comm, conn, &reg, buf);
  else if (rank == 1) run_peer(comm, conn, &reg, buf);
  else {
    run_stranger(comm);
    CHECK_OK(mscclppBootstrapBarrier(comm));
    CHECK_OK(mscclppBootstrapBarrier(comm));
    CHECK_OK(mscclppBootstrapBarrier(comm));
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0) printf("transport_net_auth: ok in %.2f s\n", tmp_now() - t0);
  if (conn != NULL) CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppRegisteredMemoryRelease(&reg));
  CHECK_OK(mscclppCommDestroy(comm));
  free(buf);
  return 0;
}
#endif /* MPP_TEST_FABRIC */
