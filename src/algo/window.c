/* window.c - registered windows (mscclppCommWindowRegister): every rank's buffer of a window is
 * known to every rank, so a GPU collective whose buffers lie in windows reaches its peers' buffers
 * without an exchange (algo/gpu/zc.c). Registration is collective; the checks that decide whether
 * to fail run on data every rank shares, so every rank fails alike. */
#include <stdlib.h>
#include <string.h>

#include <mscclpp/collectives.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/handle_reg.h"
#include "util/err.h"
#include "util/param.h"

static const struct algo_win* in_list(const struct algo_win* w, const void* p, size_t bytes) {
  const char* c = p;
  for (; w; w = w->next)
    if (c >= w->base && bytes <= w->size && (size_t)(c - w->base) <= w->size - bytes) return w;
  return NULL;
}

static const struct algo_win* win_holding(const struct algo_comm* ac, const void* p, size_t bytes) {
  return in_list(ac->wins, p, bytes);
}

/* In a window or a local registration. */
static int registered(const struct algo_comm* ac, const void* p, size_t bytes) {
  return in_list(ac->wins, p, bytes) || in_list(ac->regs, p, bytes);
}

void algo_win_find(const struct algo_comm* ac, struct algo_args* a) {
  a->win[0] = a->win[1] = NULL;
  a->registered = 0;
  if ((ac->wins == NULL && ac->regs == NULL) || ac->kind != mscclppRankGpu) return;
  uint64_t b = (uint64_t)a->count * a->es, n = (uint64_t)ac->nranks, sb, rb;
  switch (a->coll) {
    case ALGO_COLL_ALLREDUCE: sb = b, rb = b; break;
    case ALGO_COLL_ALLGATHER: sb = b, rb = b * n; break;
    case ALGO_COLL_REDUCESCATTER: sb = b * n, rb = b; break;
    case ALGO_COLL_ALLTOALL: sb = b * n, rb = b * n; break;
    default: return; /* no zero-copy algorithm */
  }
  const struct algo_win* s = win_holding(ac, a->send, sb);
  const struct algo_win* r = s ? win_holding(ac, a->recv, rb) : NULL;
  if (s && r) {
    a->win[0] = s, a->win[1] = r;
    return;
  }
  /* The swap costs the same for every collective, and allreduce saves the most per byte (measured:
   * docs/measurements.md, session 11): the others start at four times the size. */
  uint64_t big = sb > rb ? sb : rb, min = (uint64_t)param_int(PARAM_REGISTERED_ZC_MIN);
  if (a->coll != ALGO_COLL_ALLREDUCE) min *= 4;
  a->registered = big >= min && registered(ac, a->send, sb) && registered(ac, a->recv, rb);
}

/* Frees every window or registration of a list (kind: which) at the communicator's teardown. */
static void free_list(struct algo_win** head, enum handle_kind kind) {
  while (*head) {
    struct algo_win* w = *head;
    *head = w->next;
    handle_remove_with_comm(kind, w);
    free(w);
  }
}

void algo_win_free_all(struct algo_comm* ac) {
  free_list(&ac->wins, HANDLE_WINDOW);
  free_list(&ac->regs, HANDLE_BUFFER_REG);
}

static mscclppResult_t overlap_check(const struct algo_comm* ac, const char* buff, size_t size) {
  for (const struct algo_win* w = ac->wins; w; w = w->next)
    if (buff < w->base + w->size && w->base < buff + size)
      return MPP_ERR(mscclppInvalidArgument,
                     "mscclppCommWindowRegister: [%p, +%zu bytes) overlaps the window [%p, +%zu bytes) of this rank",
                     (void*)buff, size, (void*)w->base, w->size);
  return mscclppSuccess;
}

/* Every rank's size, gathered; InvalidArgument on every rank when they differ. A local failure
 * (local != Success) is shared as size 0, so the others fail too instead of mapping. */
static mscclppResult_t sizes_agree(struct algo_comm* ac, size_t size, mscclppResult_t local) {
  uint64_t* all = calloc((size_t)ac->nranks, sizeof(*all));
  if (all == NULL) return MPP_ERR(mscclppSystemError, "mscclppCommWindowRegister: out of host memory");
  all[ac->rank] = local == mscclppSuccess ? size : 0;
  mscclppResult_t res = bootstrap_allgather(ac->comm->boot, all, sizeof(*all));
  for (int q = 0; q < ac->nranks && res == mscclppSuccess; q++) {
    if (all[q] == 0)
      res = local != mscclppSuccess ? local
                                    : MPP_ERR(mscclppRemoteError, "mscclppCommWindowRegister: rank %d refused its buffer", q);
    else if (all[q] != all[0]) /* the same text on every rank */
      res = MPP_ERR(mscclppInvalidArgument, "mscclppCommWindowRegister: rank %d registers %llu bytes, rank 0 %llu "
                    "(a window has the same size on every rank)", q, (unsigned long long)all[q], (unsigned long long)all[0]);
  }
  free(all);
  return res;
}

mscclppResult_t mscclppCommWindowRegister(mscclppComm_t comm, void* buff, size_t size, mscclppWindow_t* win) {
  MPP_CHECK_ARG(comm != NULL, "mscclppCommWindowRegister: comm is NULL");
  MPP_CHECK_ARG(win != NULL, "mscclppCommWindowRegister: win is NULL");
  *win = NULL;
  COMM_CHECK(comm);
  struct algo_comm* ac = NULL;
  MPP_CHECK(algo_comm_get(comm, &ac));
  /* Arguments are checked locally, then agreed on, so a bad one fails every rank. */
  mscclppResult_t local = mscclppSuccess;
  if (buff == NULL || size == 0)
    local = MPP_ERR(mscclppInvalidArgument, "mscclppCommWindowRegister: %s", buff == NULL ? "buff is NULL" : "size is 0");
  if (local == mscclppSuccess) local = overlap_check(ac, buff, size);
  MPP_CHECK(sizes_agree(ac, size, local));
  struct algo_win* w = calloc(1, sizeof(*w));
  if (w == NULL) return MPP_ERR(mscclppSystemError, "mscclppCommWindowRegister: out of host memory");
  w->base = buff, w->size = size;
  mscclppResult_t res = handle_add(HANDLE_WINDOW, w, comm);
  if (res == mscclppSuccess && ac->kind == mscclppRankGpu) {
    res = gpu_win_map(ac, w);
    if (res != mscclppSuccess) handle_remove(HANDLE_WINDOW, w);
  }
  if (res != mscclppSuccess) {
    free(w);
    return res;
  }
  w->next = ac->wins, ac->wins = w;
  *win = (mscclppWindow_t)w;
  return mscclppSuccess;
}

/* Removes w from *head and frees it; 0 when it is not there. */
static int list_remove(struct algo_win** head, const struct algo_win* w) {
  for (struct algo_win** p = head; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      free((void*)w);
      return 1;
    }
  return 0;
}

mscclppResult_t mscclppCommWindowDeregister(mscclppComm_t comm, mscclppWindow_t win) {
  MPP_CHECK_ARG(comm != NULL, "mscclppCommWindowDeregister: comm is NULL");
  MPP_CHECK(handle_check(HANDLE_WINDOW, win, __func__)); /* first: after a comm destroy, names the window */
  COMM_CHECK(comm);
  MPP_CHECK(handle_check_owned(HANDLE_WINDOW, win, comm, __func__));
  struct algo_comm* ac = NULL;
  MPP_CHECK(algo_comm_get(comm, &ac));
  MPP_CHECK(handle_retire(HANDLE_WINDOW, win, __func__));
  if (list_remove(&ac->wins, (const struct algo_win*)win)) return mscclppSuccess;
  return MPP_ERR(mscclppInvalidArgument, "mscclppCommWindowDeregister: %p is not a window of this communicator", (void*)win);
}

mscclppResult_t mscclppCommBufferRegister(mscclppComm_t comm, void* buff, size_t size, mscclppBufferReg_t* handle) {
  MPP_CHECK_ARG(comm != NULL, "mscclppCommBufferRegister: comm is NULL");
  MPP_CHECK_ARG(handle != NULL, "mscclppCommBufferRegister: handle is NULL");
  *handle = NULL;
  MPP_CHECK_ARG(buff != NULL && size != 0, "mscclppCommBufferRegister: %s", buff == NULL ? "buff is NULL" : "size is 0");
  COMM_CHECK(comm);
  struct algo_comm* ac = NULL;
  MPP_CHECK(algo_comm_get(comm, &ac));
  struct algo_win* w = calloc(1, sizeof(*w));
  if (w == NULL) return MPP_ERR(mscclppSystemError, "mscclppCommBufferRegister: out of host memory");
  w->base = buff, w->size = size;
  mscclppResult_t res = handle_add(HANDLE_BUFFER_REG, w, comm);
  if (res != mscclppSuccess) {
    free(w);
    return res;
  }
  w->next = ac->regs, ac->regs = w;
  *handle = (mscclppBufferReg_t)w;
  return mscclppSuccess;
}

mscclppResult_t mscclppCommBufferDeregister(mscclppComm_t comm, mscclppBufferReg_t handle) {
  MPP_CHECK_ARG(comm != NULL, "mscclppCommBufferDeregister: comm is NULL");
  MPP_CHECK(handle_check(HANDLE_BUFFER_REG, handle, __func__)); /* first: after a comm destroy, names it */
  COMM_CHECK(comm);
  MPP_CHECK(handle_check_owned(HANDLE_BUFFER_REG, handle, comm, __func__));
  struct algo_comm* ac = NULL;
  MPP_CHECK(algo_comm_get(comm, &ac));
  MPP_CHECK(handle_retire(HANDLE_BUFFER_REG, handle, __func__));
  if (list_remove(&ac->regs, (const struct algo_win*)handle)) return mscclppSuccess;
  return MPP_ERR(mscclppInvalidArgument, "mscclppCommBufferDeregister: %p is not a registration of this communicator",
                 (void*)handle);
}
