/* mscclpp-run - a launcher for tests and tools: the ranks of one host.
 *
 *   mscclpp-run -n N [--nnodes K --node-rank I] [--port P] [--host H] [--grace S] [--] PROGRAM ARGS...
 *
 * With --nnodes K (K > 1) the job has K*N ranks on K hosts, one mscclpp-run on each: host I starts
 * global ranks I*N .. I*N+N-1 (local ranks 0..N-1); every host's --host and --port name the root's
 * (host 0's) address, and MSCCLPP_BOOTSTRAP_SECRET must be set, the same on every host.
 *
 * Starts N copies of PROGRAM with MSCCLPP_RANK, MSCCLPP_WORLD_SIZE, MSCCLPP_LOCAL_RANK,
 * MSCCLPP_LOCAL_WORLD_SIZE, MSCCLPP_MASTER_ADDR (H, default 127.0.0.1) and MSCCLPP_MASTER_PORT
 * (P, default a port that was free on 127.0.0.1) set, and MSCCLPP_BOOTSTRAP_SECRET, a random one per
 * job unless the caller set one, so that the job's rendezvous is authenticated (docs/security.md).
 * SIGINT and SIGTERM are passed on to the
 * children. When a child fails (non-zero exit or a signal) the others get S seconds (default 10)
 * to finish, then are killed. The exit status is the worst child's: 0 when all succeeded, 77 only
 * when every child exited 77 (skipped), 128+S for a child killed by signal S. Prints nothing of its
 * own unless something fails. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sigtimedwait, setenv */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_RANKS 1024

struct options {
  int n, port, grace_s;
  int nnodes, node_rank; /* hosts of the job, and which one this is (1 and 0: a single-host job) */
  const char* host;
  char** argv; /* PROGRAM ARGS... */
};

static const struct cli_opt run_opts[] = {
    {"-n, --np", "N", "number of ranks (processes) to start, 1..1024 (required)"},
    {"--nnodes", "K", "hosts of the job, one mscclpp-run on each (default 1): K*N ranks in all"},
    {"--node-rank", "I", "which host this is, 0..K-1: it starts ranks I*N .. I*N+N-1"},
    {"--port", "P", "the bootstrap root's port (MSCCLPP_MASTER_PORT); default: one free on 127.0.0.1\n"
                    "(required with --nnodes)"},
    {"--host", "H", "the bootstrap root's address (MSCCLPP_MASTER_ADDR); default 127.0.0.1"},
    {"--grace", "SECONDS", "after a rank fails, how long the others may run before they are killed\n"
                          "(0..86400, default 10)"},
    {"--", NULL, "ends the options: what follows is PROGRAM and its arguments"},
    {"-h, --help", NULL, "this help"},
    {NULL, NULL, NULL}};

static const struct cli_help run_help = {
    "mscclpp-run", "mscclpp-run -n N [--nnodes K --node-rank I] [--port P] [--host H] [--grace SECONDS] [--] PROGRAM [ARGS...]",
    "Starts N copies of PROGRAM on this host with MSCCLPP_RANK, MSCCLPP_WORLD_SIZE, MSCCLPP_LOCAL_RANK,\n"
    "MSCCLPP_LOCAL_WORLD_SIZE, MSCCLPP_MASTER_ADDR and MSCCLPP_MASTER_PORT set (what\n"
    "mscclppCommInitFromEnv reads), and MSCCLPP_BOOTSTRAP_SECRET: a random secret per job unless\n"
    "it is set already. SIGINT and SIGTERM are passed on to the ranks. On several hosts, run one\n"
    "mscclpp-run per host with --nnodes, --node-rank, the root host's --host and --port, and one\n"
    "MSCCLPP_BOOTSTRAP_SECRET exported on every host (docs/multinode.md).",
    run_opts,
    "Exit status: 0 when every rank succeeded, 77 when every rank exited 77 (skipped), else the\n"
    "worst rank's (128+S for a rank killed by signal S); 2 for a bad command line."};

/* Parses a decimal integer in [lo, hi] or exits 2 naming the option and the value. */
static int parse_int(const char* what, const char* s, int lo, int hi) {
  long long v = 0;
  if (!s) exit(cli_usage_error("mscclpp-run", "%s needs a value", what));
  if (cli_parse_int(s, lo, hi, &v) != 0)
    exit(cli_usage_error("mscclpp-run", "%s must be an integer in [%d, %d], got '%s'", what, lo, hi, s));
  return (int)v;
}

/* The rules of a job on several hosts (--nnodes), or exits 2 naming the one broken. */
static void check_nodes(struct options* o) {
  if (o->nnodes == 1 && o->node_rank <= 0) {
    o->node_rank = 0;
    return;
  }
  if (o->node_rank < 0 || o->node_rank >= o->nnodes)
    exit(cli_usage_error("mscclpp-run", "--node-rank must be in [0, %d] for --nnodes %d", o->nnodes - 1, o->nnodes));
  if ((long)o->n * o->nnodes > MAX_RANKS)
    exit(cli_usage_error("mscclpp-run", "-n %d x --nnodes %d is more than %d ranks", o->n, o->nnodes, MAX_RANKS));
  if (o->port == 0) exit(cli_usage_error("mscclpp-run", "--nnodes needs --port: every host must name the same root port"));
  const char* secret = getenv("MSCCLPP_BOOTSTRAP_SECRET");
  if (secret == NULL || !*secret)
    exit(cli_usage_error("mscclpp-run", "--nnodes needs MSCCLPP_BOOTSTRAP_SECRET set, the same on every host"));
}

static void parse_args(int argc, char** argv, struct options* o) {
  o->n = 0, o->port = 0, o->grace_s = 10, o->host = "127.0.0.1", o->nnodes = 1, o->node_rank = -1;
  if (cli_wants_help(argc, argv)) exit((cli_print_help(&run_help), 0));
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "-n") == 0 || strcmp(a, "--np") == 0) {
      o->n = parse_int(a, v, 1, MAX_RANKS), i++;
    } else if (strcmp(a, "--nnodes") == 0) {
      o->nnodes = parse_int(a, v, 1, MAX_RANKS), i++;
    } else if (strcmp(a, "--node-rank") == 0) {
      o->node_rank = parse_int(a, v, 0, MAX_RANKS - 1), i++;
    } else if (strcmp(a, "--port") == 0) {
      o->port = parse_int(a, v, 1, 65535), i++;
    } else if (strcmp(a, "--host") == 0) {
      if (!v || !*v) exit(cli_usage_error("mscclpp-run", "--host needs an address"));
      o->host = v, i++;
    } else if (strcmp(a, "--grace") == 0) {
      o->grace_s = parse_int(a, v, 0, 86400), i++;
    } else {
      exit(cli_usage_error("mscclpp-run", "unknown option '%s'", a));
    }
  }
  if (o->n == 0) exit(cli_usage_error("mscclpp-run", "-n N (the number of ranks) is required"));
  if (i >= argc) exit(cli_usage_error("mscclpp-run", "no PROGRAM to run"));
  o->argv = argv + i;
  check_nodes(o);
}

/* Whether port can be bound on 127.0.0.1 now. */
static int port_free(int port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int ok = s >= 0 && bind(s, (struct sockaddr*)&a, sizeof(a)) == 0;
  if (s >= 0) close(s);
  return ok;
}

/* The first port of the kernel's ephemeral range (ports it hands to bind(0) and connect). */
static int ephemeral_low(void) {
  int lo = 32768, hi = 60999;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
  if (f != NULL) {
    if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
    fclose(f);
  }
  return lo;
}

/* A TCP port free on 127.0.0.1 a moment ago, for the root. Chosen at random below the kernel's
 * ephemeral range: every rank's own listener and every connection take ephemeral ports, so a port
 * the kernel picked (and this process released) could be taken by one of them, or by another job's,
 * before rank 0 binds it; below that range only another explicit choice can collide. The kernel's
 * pick is the fallback when that range is too small or full. */
static int free_port(void) {
  int lo = 10000, hi = ephemeral_low() - 1;
  for (int tries = 0; hi - lo >= 1000 && tries < 64; tries++) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) break;
    int port = lo + (int)(r % (uint32_t)(hi - lo + 1));
    if (port_free(port)) return port;
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (s < 0 || bind(s, (struct sockaddr*)&a, sizeof(a)) != 0 || getsockname(s, (struct sockaddr*)&a, &len) != 0) {
    perror("mscclpp-run: finding a free port");
    exit(1);
  }
  close(s);
  return ntohs(a.sin_port);
}

static void set_env_int(const char* name, int v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%d", v);
  setenv(name, buf, 1);
}

/* Forks rank `rank`; the child gets the original signal mask back before exec. */
static pid_t spawn(const struct options* o, int rank, const sigset_t* orig_mask) {
  pid_t pid = fork();
  if (pid < 0) {
    perror("mscclpp-run: fork");
    return -1;
  }
  if (pid > 0) return pid;
  sigprocmask(SIG_SETMASK, orig_mask, NULL);
  set_env_int("MSCCLPP_RANK", o->node_rank * o->n + rank);
  set_env_int("MSCCLPP_WORLD_SIZE", o->n * o->nnodes);
  set_env_int("MSCCLPP_LOCAL_RANK", rank);
  set_env_int("MSCCLPP_LOCAL_WORLD_SIZE", o->n);
  setenv("MSCCLPP_MASTER_ADDR", o->host, 1);
  set_env_int("MSCCLPP_MASTER_PORT", o->port);
  execvp(o->argv[0], o->argv);
  fprintf(stderr, "mscclpp-run: cannot run %s: %s\n", o->argv[0], strerror(errno));
  _exit(127);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct child {
  pid_t pid;
  int rank;       /* the global rank it runs */
  int done, code; /* code: exit status, or 128+signal */
  int reaped_by_us; /* killed by the launcher after another rank failed */
};

static void kill_all(struct child* c, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (!c[i].done && c[i].pid > 0) {
      kill(c[i].pid, sig);
      if (sig == SIGKILL) c[i].reaped_by_us = 1;
    }
}

/* Reaps finished children; returns how many failed among those reaped now. */
static int reap(struct child* c, int n, int* left) {
  int failed = 0, status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (int i = 0; i < n; i++) {
      if (c[i].pid != pid || c[i].done) continue;
      c[i].done = 1, (*left)--;
      c[i].code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (c[i].code != 0) failed++;
    }
  }
  return failed;
}

/* Waits for every child, forwarding signals and enforcing the grace period after a failure. */
static void supervise(struct child* c, int n, int grace_s, const sigset_t* set) {
  int left = 0;
  for (int i = 0; i < n; i++) left += c[i].pid > 0 ? 1 : (c[i].done = 1, c[i].code = 127, 0);
  double kill_at = left < n ? now_s() + grace_s : -1;
  int killed = 0;
  while (left > 0) {
    if (reap(c, n, &left) > 0 && kill_at < 0) kill_at = now_s() + grace_s;
    if (left == 0) break;
    if (kill_at >= 0 && !killed && now_s() >= kill_at) {
      fprintf(stderr, "mscclpp-run: a rank failed; killing the %d still running after %d s\n", left, grace_s);
      kill_all(c, n, SIGKILL);
      killed = 1;
    }
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
    siginfo_t info;
    int sig = sigtimedwait(set, &info, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      kill_all(c, n, sig);
      if (kill_at < 0) kill_at = now_s() + grace_s;
    }
  }
}

/* One line per exit status that ranks failed with ("ranks 0, 2 exited with status 1"), the ranks
 * the launcher killed left out: a failure that every rank shares shows once. */
static void report_failures(const struct child* c, int n) {
  for (int i = 0; i < n; i++) {
    int code = c[i].code, first = 1;
    if (code == 0 || code == 77 || c[i].reaped_by_us) continue;
    for (int j = 0; j < i && first; j++) first = !(c[j].code == code && !c[j].reaped_by_us);
    if (!first) continue;
    char list[256] = "";
    int count = 0;
    for (int j = i; j < n; j++)
      if (c[j].code == code && !c[j].reaped_by_us && strlen(list) + 16 < sizeof(list))
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%d", count++ ? ", " : "", c[j].rank);
    if (code > 128) fprintf(stderr, "mscclpp-run: rank%s %s killed by signal %d\n", count > 1 ? "s" : "", list, code - 128);
    else fprintf(stderr, "mscclpp-run: rank%s %s exited with status %d\n", count > 1 ? "s" : "", list, code);
  }
}

/* The worst exit status among the ranks that ended by themselves (ranks the launcher killed after
 * a failure count only when nothing else failed, so the first failure's status is not masked). */
static int worst_status(const struct child* c, int n) {
  int all77 = 1, worst = 0, own_failure = 0;
  for (int i = 0; i < n; i++) {
    if (c[i].code != 77) all77 = 0;
    if (c[i].code != 0 && !c[i].reaped_by_us) own_failure = 1;
  }
  if (all77) return 77;
  for (int i = 0; i < n; i++) {
    int code = c[i].code;
    if (c[i].reaped_by_us && own_failure) continue;
    if (code == 77) { /* a partial skip is a failure */
      fprintf(stderr, "mscclpp-run: rank %d skipped (status 77) while other ranks did not\n", c[i].rank);
      code = 1;
    }
    if (code > worst) worst = code;
  }
  return worst;
}

/* Gives the job a random secret (32 hex digits from the kernel's random source) unless the caller
 * chose one: the ranks' rendezvous then refuses every process that is not one of them. */
static void set_secret(void) {
  const char* mine = getenv("MSCCLPP_BOOTSTRAP_SECRET");
  if (mine && *mine) return;
  unsigned char r[16];
  if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
    fprintf(stderr, "mscclpp-run: getrandom for the job's secret failed: %s\n", strerror(errno));
    exit(1);
  }
  char hex[2 * sizeof(r) + 1];
  for (size_t i = 0; i < sizeof(r); i++) snprintf(hex + 2 * i, 3, "%02x", r[i]);
  setenv("MSCCLPP_BOOTSTRAP_SECRET", hex, 1);
}

int main(int argc, char** argv) {
  struct options o;
  parse_args(argc, argv, &o);
  if (o.port == 0) o.port = free_port();
  set_secret();
  sigset_t set, orig;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, &orig);
  struct child* c = calloc((size_t)o.n, sizeof(*c));
  if (!c) return 1;
  fflush(NULL);
  for (int i = 0; i < o.n; i++) c[i].rank = o.node_rank * o.n + i, c[i].pid = spawn(&o, i, &orig);
  supervise(c, o.n, o.grace_s, &set);
  report_failures(c, o.n);
  int status = worst_status(c, o.n);
  free(c);
  return status;
}
