/* perf_nccl_symm.c - mscclpp-perf's NCCL side without a GPU or an NCCL (tools/perf/perf_nccl.c):
 * its functions are resolved from a table of stand-ins that log each call, and the test asserts
 * - a library without the window functions (NCCL before 2.27) still loads, and the symmetric
 *   windows are reported missing by name; a missing required function fails naming it;
 * - --nccl-symm's buffers: ncclMemAlloc twice, both registered over the communicator with
 *   NCCL_WIN_COLL_SYMMETRIC and their whole size, released in reverse (windows, then memory);
 * - a failed allocation leaves nothing allocated; a failed registration leaves only what was
 *   registered to deregister;
 * - sendrecv is one group: send to rank+1, receive from rank-1. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "helpers.h"
#include "perf_nccl.h"

static char log_[2048];
static int fail_alloc_at, fail_register_at, nalloc, nregister; /* 1-based call to fail, 0: none */
static char mem[2][64];
static int win[2];
static int comm_token;

/* Appends one call to the log. */
__attribute__((format(printf, 1, 2))) static void note(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t at = strlen(log_);
  vsnprintf(log_ + at, sizeof(log_) - at, fmt, ap);
  va_end(ap);
}
/* pointers as names: buffers s/r, windows ws/wr, the communicator c */
static const char* name(const void* p) {
  return p == mem[0] ? "s" : p == mem[1] ? "r" : p == &win[0] ? "ws" : p == &win[1] ? "wr" : p == &comm_token ? "c" : "?";
}

static const char* err_string(int r) { return r == 0 ? "ok" : "stand-in failure"; }
static int mem_alloc(void** p, size_t bytes) {
  if (++nalloc == fail_alloc_at) return note("alloc(%zu)=fail ", bytes), 2;
  *p = mem[nalloc - 1];
  note("alloc(%zu) ", bytes);
  return 0;
}
static int mem_free(void* p) { return note("free(%s) ", name(p)), 0; }
static int win_register(void* comm, void* buf, size_t bytes, void** w, int flags) {
  if (++nregister == fail_register_at) return note("reg(%s,%zu,%d)=fail ", name(buf), bytes, flags), 2;
  *w = &win[nregister - 1];
  note("reg(%s,%s,%zu,%d) ", name(comm), name(buf), bytes, flags);
  return 0;
}
static int win_deregister(void* comm, void* w) {
  note("dereg(%s,%s) ", name(comm), name(w));
  return 0;
}
static int group_start(void) { return note("group "), 0; }
static int group_end(void) { return note("end "), 0; }
static int send_(const void* buf, size_t n, int t, int peer, void* comm, void* st) {
  (void)t, (void)comm, (void)st;
  return note("send(%s,%zu,%d) ", (const char*)buf, n, peer), 0;
}
static int recv_(void* buf, size_t n, int t, int peer, void* comm, void* st) {
  (void)t, (void)comm, (void)st;
  return note("recv(%s,%zu,%d) ", (const char*)buf, n, peer), 0;
}
static int any(void) { return 0; }

static const char* omit; /* a name the table leaves out */

/* The stand-in library's dlsym: the window and sendrecv functions above, anything else a dummy. */
static void* lookup(void* lib, const char* sym) {
  (void)lib;
  if (omit && strcmp(sym, omit) == 0) return NULL;
  static const struct {
    const char* name;
    void* fn;
  } table[] = {{"ncclGetErrorString", (void*)err_string}, {"ncclMemAlloc", (void*)mem_alloc},
               {"ncclMemFree", (void*)mem_free},          {"ncclCommWindowRegister", (void*)win_register},
               {"ncclCommWindowDeregister", (void*)win_deregister},
               {"ncclGroupStart", (void*)group_start},    {"ncclGroupEnd", (void*)group_end},
               {"ncclSend", (void*)send_},                {"ncclRecv", (void*)recv_}};
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
    if (strcmp(sym, table[i].name) == 0) return table[i].fn;
  return (void*)any;
}

static void reset(void) { log_[0] = 0, nalloc = nregister = fail_alloc_at = fail_register_at = 0; }

static void check_loading(void) {
  char why[256] = "";
  struct perf_nccl nc = {.path = "libstand-in.so"};
  omit = "ncclCommWindowRegister"; /* an NCCL before 2.27 */
  CHECK(perf_nccl_resolve(&nc, lookup, NULL, why, sizeof(why)) == 0);
  CHECK(perf_nccl_symm_supported(&nc, why, sizeof(why)) == -1);
  CHECK_MSG(strstr(why, "libstand-in.so has no ncclCommWindowRegister") && strstr(why, "2.27"), "why: %s", why);
  omit = "ncclRedOpDestroy";
  CHECK(perf_nccl_resolve(&nc, lookup, NULL, why, sizeof(why)) == -1);
  CHECK_MSG(strcmp(why, "libstand-in.so has no ncclRedOpDestroy") == 0, "why: %s", why);
  omit = NULL;
  CHECK(perf_nccl_resolve(&nc, lookup, NULL, why, sizeof(why)) == 0);
  CHECK(perf_nccl_symm_supported(&nc, why, sizeof(why)) == 0);
}

static void check_windows(struct perf_nccl* nc) {
  char why[256] = "";
  struct perf_nccl_symm w;
  reset();
  CHECK(perf_nccl_symm_alloc(nc, &w, 4160, why, sizeof(why)) == 0);
  CHECK(perf_nccl_symm_register(nc, &w, why, sizeof(why)) == 0);
  perf_nccl_symm_release(nc, &w);
  const char* want = "alloc(8192) alloc(8192) reg(c,s,8192,1) reg(c,r,8192,1) dereg(c,wr) dereg(c,ws) free(r) free(s) ";
  CHECK_MSG(strcmp(log_, want) == 0, "calls:\n  %s\nwanted:\n  %s", log_, want);
  CHECK(w.send == NULL && w.recv == NULL && w.wsend == NULL && w.wrecv == NULL);

  reset(), fail_alloc_at = 2;
  CHECK(perf_nccl_symm_alloc(nc, &w, 64, why, sizeof(why)) == -1);
  CHECK_MSG(strcmp(why, "ncclMemAlloc of 4096 bytes: stand-in failure") == 0, "why: %s", why);
  CHECK_MSG(strcmp(log_, "alloc(4096) alloc(4096)=fail free(s) ") == 0, "calls: %s", log_);
  CHECK(w.send == NULL && w.recv == NULL);

  reset(), fail_register_at = 2;
  CHECK(perf_nccl_symm_alloc(nc, &w, 64, why, sizeof(why)) == 0);
  CHECK(perf_nccl_symm_register(nc, &w, why, sizeof(why)) == -1);
  CHECK_MSG(strstr(why, "ncclCommWindowRegister") && strstr(why, "stand-in failure"), "why: %s", why);
  perf_nccl_symm_release(nc, &w);
  want = "alloc(4096) alloc(4096) reg(c,s,4096,1) reg(r,4096,1)=fail dereg(c,ws) free(r) free(s) ";
  CHECK_MSG(strcmp(log_, want) == 0, "calls:\n  %s\nwanted:\n  %s", log_, want);
}

static void check_sendrecv(struct perf_nccl* nc) {
  reset();
  struct perf_nccl_call c = {.coll = ALGO_COLL_SENDRECV, .rank = 0, .nranks = 3, .count = 5, .es = 4, .in = "in",
                             .out = (char*)"out"};
  CHECK(perf_nccl_run(nc, &c) == 0);
  CHECK_MSG(strcmp(log_, "group send(in,5,1) recv(out,5,2) end ") == 0, "calls: %s", log_);
}

int main(void) {
  check_loading();
  struct perf_nccl nc = {.path = "libstand-in.so", .comm = &comm_token};
  CHECK(perf_nccl_resolve(&nc, lookup, NULL, log_, sizeof(log_)) == 0);
  check_windows(&nc);
  check_sendrecv(&nc);
  printf("perf_nccl_symm: OK\n");
  return 0;
}
