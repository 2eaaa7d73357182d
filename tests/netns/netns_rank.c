/* netns_rank.c - a CPU rank of a job whose hosts are network namespaces (netns_hosts.sh) or
 * stand-ins for hosts (MSCCLPP_HOSTID).
 *
 *   netns_rank probe RANKS_PER_HOST
 *     Ranks h*R .. h*R+R-1 are on host h (mscclpp-run --nnodes puts them so). Asserts the
 *     communicator's local rank and size say the same, and that an Auto connection to every peer
 *     is shm on this host and tcp to any other (host identity: docs/multinode.md).
 *   netns_rank hostid RANKS_PER_HOST
 *     As probe, in one namespace: each rank first sets MSCCLPP_HOSTID=host<rank / R>.
 *   netns_rank fail VICTIM
 *     Allreduces in a loop (checked); the victim, after a few, writes its pid to
 *     $NETNS_DIR/victim.pid and goes on until netns_hosts.sh kills it or cuts its host's link.
 *     Every other rank's failing call must fail within 2 s of that event ($NETNS_DIR/event) naming
 *     the victim; a victim that survives (link cut) must fail within the same bound. Each rank also
 *     prints how long its most starved thread waited for a CPU during the failing call, so that a
 *     late failure on a loaded machine says whether the rank could run at all. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "mp/transport_mp.h"
#include "netns/netns_event.h"

#define FAIL_COUNT 4096
#define DETECT_LIMIT_S 2.0 /* the bound, from the event to the failing call's return */

static int env_rank(void) {
  const char* r = getenv("MSCCLPP_RANK");
  return r ? atoi(r) : 0;
}

static void probe(int rph) {
  int rank, n, lrank, lsize;
  mscclppComm_t comm = tmp_init(&rank, &n);
  CHECK_MSG(rph > 0 && n % rph == 0, "%d ranks do not split into hosts of %d", n, rph);
  CHECK_OK(mscclppCommLocalRank(comm, &lrank, &lsize));
  CHECK_MSG(lrank == rank % rph && lsize == rph, "rank %d: local rank %d of %d, expected %d of %d", rank, lrank, lsize,
            rank % rph, rph);
  mscclppConnection_t* conn = calloc((size_t)n, sizeof(*conn));
  CHECK(conn != NULL);
  for (int p = 0; p < n; p++) {
    if (p == rank) continue;
    CHECK_OK(mscclppConnectionCreate(comm, p, 3, mscclppTransportAuto, &conn[p]));
    mscclppTransport_t t, want = p / rph == rank / rph ? mscclppTransportSHM : mscclppTransportTCP;
    CHECK_OK(mscclppConnectionTransport(conn[p], &t));
    CHECK_MSG(t == want, "rank %d -> %d: transport %d, expected %d (%s)", rank, p, (int)t, (int)want,
              want == mscclppTransportSHM ? "same host" : "different hosts");
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
  for (int p = 0; p < n; p++)
    if (p != rank) CHECK_OK(mscclppConnectionDestroy(conn[p]));
  free(conn);
  CHECK_OK(mscclppCommDestroy(comm));
  printf("netns_rank: rank %d of %d: local %d of %d; shm in the host, tcp across\n", rank, n, lrank, lsize);
}

/* Run-queue waits of this process's threads (/proc/self/task/TID/schedstat, 2nd field: ns spent
 * runnable but not running), to tell a late failure caused by a starved machine from a slow
 * detection: the bound is wall time, and a thread that gets no CPU cannot notice anything. */
#define MAX_TASKS 64
struct runq {
  int n, tid[MAX_TASKS];
  unsigned long long wait_ns[MAX_TASKS];
};

static void runq_read(struct runq* q) {
  q->n = 0;
  DIR* d = opendir("/proc/self/task");
  for (struct dirent* e; d && (e = readdir(d)) != NULL && q->n < MAX_TASKS;) {
    char path[64];
    unsigned long long run, wait;
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "/proc/self/task/%.16s/schedstat", e->d_name);
    FILE* f = fopen(path, "re");
    if (f && fscanf(f, "%llu %llu", &run, &wait) == 2) q->tid[q->n] = atoi(e->d_name), q->wait_ns[q->n++] = wait;
    if (f) fclose(f);
  }
  if (d) closedir(d);
}

/* The longest run-queue wait any one thread had since `since` was read, in seconds. */
static double runq_max_since(const struct runq* since) {
  struct runq now;
  runq_read(&now);
  unsigned long long worst = 0;
  for (int i = 0; i < now.n; i++) {
    unsigned long long base = 0;
    for (int j = 0; j < since->n; j++)
      if (since->tid[j] == now.tid[i]) base = since->wait_ns[j];
    if (now.wait_ns[i] - base > worst) worst = now.wait_ns[i] - base;
  }
  return (double)worst * 1e-9;
}

/* The event's time from $NETNS_DIR/event (written when the harness's kill or cut returned). */
static double event_time(const char* dir) {
  double t = netns_event_time(dir);
  if (t < 0) TEST_FAIL("no event time in %s/event: this rank failed before the harness acted", dir);
  return t;
}

static void announce(const char* dir) {
  char tmp[512], path[512];
  snprintf(tmp, sizeof(tmp), "%s/victim.tmp", dir);
  snprintf(path, sizeof(path), "%s/victim.pid", dir);
  FILE* f = fopen(tmp, "we");
  CHECK_MSG(f != NULL, "cannot write %s: %s", tmp, strerror(errno));
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  CHECK_MSG(rename(tmp, path) == 0, "cannot rename to %s: %s", path, strerror(errno));
}

/* A failed call: names the victim (survivors) and came within the bound of the event. */
static int judge(mscclppComm_t comm, int rank, int victim, mscclppResult_t res, const char* dir,
                 const struct runq* call_start) {
  double at = netns_boot_now(), starved = runq_max_since(call_start);
  char e[1024], who[32];
  snprintf(e, sizeof(e), "%s", mscclppGetLastError());
  mscclppCommAbort(comm); /* at once, as an application does */
  double late = at - event_time(dir);
  printf("netns_rank: rank %d failed %.2f s after the event (a thread of it waited up to %.2f s for a CPU): %s\n",
         rank, late, starved, e);
  CHECK_MSG(res == mscclppRemoteError || res == mscclppTimeout, "rank %d: allreduce returned %d: %s", rank, (int)res, e);
  snprintf(who, sizeof(who), "rank %d ", victim);
  CHECK_MSG(rank == victim || strstr(e, who) != NULL, "rank %d: the error does not name rank %d: %s", rank, victim, e);
  double load = 0;
  FILE* la = fopen("/proc/loadavg", "re");
  if (la && fscanf(la, "%lf", &load) != 1) load = 0;
  if (la) fclose(la);
  CHECK_MSG(late < DETECT_LIMIT_S,
            "rank %d: failed %.2f s after the event (limit %.1f s); during the failing call a thread of this rank "
            "waited up to %.2f s for a CPU (load average %.1f)",
            rank, late, DETECT_LIMIT_S, starved, load);
  usleep(1000000); /* the others fail on their own, not from our exit */
  return 0;
}

static int fail_loop(int victim) {
  const char* dir = getenv("NETNS_DIR");
  CHECK_MSG(dir != NULL, "NETNS_DIR is not set: run under netns_hosts.sh");
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  CHECK_MSG(victim > 0 && victim < n, "victim %d is not a rank of %d other than the root", victim, n);
  static float in[FAIL_COUNT], out[FAIL_COUNT];
  for (int i = 0; i < FAIL_COUNT; i++) in[i] = (float)rank;
  double ready_at = -1;
  static struct runq call_start; /* zero before iteration 5: the whole run is the window */
  for (int it = 0;; it++) {
    if (rank == victim && it == 5) announce(dir);
    if (it == 5) ready_at = tmp_now();
    if (it >= 5) runq_read(&call_start);
    mscclppResult_t res = mscclppAllReduce(in, out, FAIL_COUNT, mscclppFloat, mscclppSum, comm, NULL);
    if (res != mscclppSuccess) return judge(comm, rank, victim, res, dir, &call_start);
    float want = (float)n * (float)(n - 1) / 2.0f;
    CHECK_MSG(out[7] == want, "rank %d: iteration %d: out[7] = %g, expected %g", rank, it, (double)out[7], (double)want);
    CHECK_MSG(ready_at < 0 || tmp_now() - ready_at < 20.0, "rank %d: the victim's fate was never noticed", rank);
  }
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && strcmp(argv[1], "probe") == 0) {
    probe(atoi(argv[2]));
  } else if (argc == 3 && strcmp(argv[1], "hostid") == 0) {
    char id[32];
    snprintf(id, sizeof(id), "host%d", env_rank() / (atoi(argv[2]) > 0 ? atoi(argv[2]) : 1));
    setenv("MSCCLPP_HOSTID", id, 1);
    probe(atoi(argv[2]));
  } else if (argc == 3 && strcmp(argv[1], "fail") == 0) {
    return fail_loop(atoi(argv[2]));
  } else {
    fprintf(stderr, "usage: netns_rank probe|hostid RANKS_PER_HOST | netns_rank fail VICTIM\n");
    return 2;
  }
  return 0;
}
