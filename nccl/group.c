/* group.c - ncclGroupStart/End per thread. Inside a group, collectives and point-to-point calls
 * are queued, and communicator inits (nccl-tests -g N: one thread initialises several ranks) wait.
 * Symmetric window registrations (collective) queue too, as NCCL defers them.
 * The outermost ncclGroupEnd first initialises every pending communicator at once (a thread each,
 * since every rank's init waits for the others), then runs the queue: each communicator's calls
 * in call order inside one library group (mscclppGroupStart/End, which progresses its sends and
 * receives together). When the queue holds several communicators (ranks driven from one thread),
 * each but the first runs on its communicator's worker thread (worker.c) while this thread runs
 * the first, since one rank's call may wait for another's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* A thread's group: its depth, the inits it defers and the calls it queues. The arrays stay
 * allocated from group to group (a steady loop of groups allocates nothing) and are freed when
 * the thread ends (a key destructor). */
struct group_state {
  int depth;
  ncclComm_t* pending;
  size_t npending, cappending;
  struct shim_op* queue;
  size_t nqueue, capqueue;
};

static _Thread_local struct group_state* gs;
static pthread_key_t gs_key;
static pthread_once_t gs_once = PTHREAD_ONCE_INIT;

static void gs_free(void* p) {
  struct group_state* s = p;
  free(s->pending), free(s->queue), free(s);
}

static void gs_make_key(void) { (void)pthread_key_create(&gs_key, gs_free); }

/* The thread's state, made on first use; NULL when out of memory. */
static struct group_state* state(void) {
  if (gs) return gs;
  pthread_once(&gs_once, gs_make_key);
  gs = calloc(1, sizeof(*gs));
  if (gs) (void)pthread_setspecific(gs_key, gs);
  return gs;
}

int shim_group_depth(void) { return gs ? gs->depth : 0; }

/* Appends *item to the thread's array *arr (of *n, room *cap); 0, or -1 out of memory. */
static int append(void** arr, size_t* n, size_t* cap, const void* item, size_t size) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    void* q = realloc(*arr, c * size);
    if (!q) return -1;
    *arr = q, *cap = c;
  }
  memcpy((char*)*arr + *n * size, item, size);
  (*n)++;
  return 0;
}

ncclResult_t shim_group_defer_init(ncclComm_t comm) {
  struct group_state* s = state();
  if (!s || append((void**)&s->pending, &s->npending, &s->cappending, &comm, sizeof(comm)))
    return shim_fail(comm, ncclSystemError, "ncclCommInitRank in a group: out of memory");
  return ncclSuccess;
}

/* The library call an op stands for. */
static mscclppResult_t run_op(const struct shim_op* o) {
  mscclppComm_t c = o->comm->c;
  mscclppDataType_t dt = (mscclppDataType_t)o->dtype;
  mscclppRedOp_t op = (mscclppRedOp_t)o->redop;
  switch (o->kind) {
    case SHIM_ALLREDUCE: return mscclppAllReduce(o->send, o->recv, o->count, dt, op, c, o->stream);
    case SHIM_ALLGATHER: return mscclppAllGather(o->send, o->recv, o->count, dt, c, o->stream);
    case SHIM_REDUCESCATTER: return mscclppReduceScatter(o->send, o->recv, o->count, dt, op, c, o->stream);
    case SHIM_BROADCAST: return mscclppBroadcast(o->send, o->recv, o->count, dt, o->peer, c, o->stream);
    case SHIM_REDUCE: return mscclppReduce(o->send, o->recv, o->count, dt, op, o->peer, c, o->stream);
    case SHIM_ALLTOALL: return mscclppAllToAll(o->send, o->recv, o->count, dt, c, o->stream);
    case SHIM_SEND: return mscclppSend(o->send, o->count, dt, o->peer, c, o->stream);
    case SHIM_RECV: return mscclppRecv(o->recv, o->count, dt, o->peer, c, o->stream);
    case SHIM_WINDOW: return mscclppCommWindowRegister(c, (void*)o->send, o->count, (mscclppWindow_t*)o->recv);
  }
  return mscclppInvalidArgument;
}

ncclResult_t shim_submit(const struct shim_op* op) {
  if (shim_group_depth() == 0) {
    ncclResult_t res = shim_ready(op->comm, op->call);
    if (res != ncclSuccess) return res;
    if (shim_fallback_forced(op->kind)) return shim_fallback_run(op);
    return shim_fail_lib(op->comm, run_op(op), op->call);
  }
  if (!op->comm || !shim_live(op->comm)) /* pending inits of this group are live already */
    return shim_fail(NULL, ncclInvalidArgument, "%s: %p is not a communicator (never made, or destroyed)", op->call,
                     (void*)op->comm);
  if (append((void**)&gs->queue, &gs->nqueue, &gs->capqueue, op, sizeof(*op)))
    return shim_fail(op->comm, ncclSystemError, "%s in a group: out of memory", op->call);
  return ncclSuccess;
}

/* One communicator's part of the queue, run in one library group. */
struct comm_run {
  ncclComm_t comm;
  const struct shim_op* ops;
  size_t nops;
  ncclResult_t res;
};

/* The calls of cr's communicator that go to the real NCCL, in one of its groups. */
static ncclResult_t run_forwarded(struct comm_run* cr) {
  size_t n = 0;
  for (size_t i = 0; i < cr->nops; i++) n += cr->ops[i].comm == cr->comm && shim_fallback_forced(cr->ops[i].kind);
  if (n == 0) return ncclSuccess;
  ncclResult_t res = shim_fallback_prepare(cr->comm, "ncclGroupEnd");
  if (res != ncclSuccess) return res;
  res = shim_fallback_group(1);
  for (size_t i = 0; res == ncclSuccess && i < cr->nops; i++)
    if (cr->ops[i].comm == cr->comm && shim_fallback_forced(cr->ops[i].kind)) res = shim_fallback_run(&cr->ops[i]);
  ncclResult_t end = shim_fallback_group(0);
  return res != ncclSuccess ? res : end;
}

/* cr's calls: the library's in one library group, then those forced to the real NCCL in one of
 * its groups (enqueued after them on their streams). */
static void run_comm(struct comm_run* cr) {
  cr->res = shim_ready(cr->comm, cr->nops ? cr->ops[0].call : "ncclGroupEnd");
  if (cr->res != ncclSuccess) return;
  mscclppResult_t r = mscclppGroupStart();
  for (size_t i = 0; r == mscclppSuccess && i < cr->nops; i++)
    if (cr->ops[i].comm == cr->comm && !shim_fallback_forced(cr->ops[i].kind) && (r = run_op(&cr->ops[i])) != mscclppSuccess) {
      cr->res = shim_fail_lib(cr->comm, r, cr->ops[i].call);
      (void)mscclppGroupEnd();
      return;
    }
  r = mscclppGroupEnd();
  cr->res = shim_fail_lib(cr->comm, r, "ncclGroupEnd");
  if (cr->res == ncclSuccess) cr->res = run_forwarded(cr);
}

static void run_comm_job(void* arg) { run_comm(arg); }

/* The group's deferred inits, all at once; the first failure is returned (each failed
 * communicator stays, in state FAILED, for the caller to destroy). */
static ncclResult_t run_pending(struct group_state* s) {
  ncclResult_t res = shim_init_together(s->pending, s->npending);
  s->npending = 0;
  return res;
}

/* Most groups hold one or a few communicators: their runs live on the stack up to this many. */
#define RUNS_ON_STACK 16

/* The queue, each communicator's calls together: every communicator but the first on its worker,
 * the first on this thread. Without a worker (no thread could be made) a part runs here after
 * the others, which ranks of CPU kind may not survive. */
static ncclResult_t run_queue(struct group_state* s) {
  struct comm_run stack_runs[RUNS_ON_STACK];
  int stack_posted[RUNS_ON_STACK];
  struct comm_run* runs = stack_runs;
  int* posted = stack_posted;
  size_t nruns = 0;
  for (size_t i = 0; i < s->nqueue; i++) { /* distinct communicators, in order of first call */
    size_t k = 0;
    while (k < nruns && runs[k].comm != s->queue[i].comm) k++;
    if (k < nruns) continue;
    if (nruns == RUNS_ON_STACK && runs == stack_runs) {
      runs = malloc(s->nqueue * sizeof(*runs)), posted = malloc(s->nqueue * sizeof(*posted));
      if (!runs || !posted) {
        if (runs != stack_runs) free(runs);
        free(posted == stack_posted ? NULL : posted);
        s->nqueue = 0;
        return shim_fail(NULL, ncclSystemError, "ncclGroupEnd: out of memory");
      }
      memcpy(runs, stack_runs, sizeof(stack_runs));
    }
    runs[nruns++] = (struct comm_run){s->queue[i].comm, s->queue, s->nqueue, ncclSuccess};
  }
  for (size_t k = 1; k < nruns; k++) {
    if (!runs[k].comm->worker) runs[k].comm->worker = shim_worker_start();
    posted[k] = runs[k].comm->worker != NULL;
    if (posted[k]) shim_worker_post(runs[k].comm->worker, run_comm_job, &runs[k]);
  }
  if (nruns) run_comm(&runs[0]);
  for (size_t k = 1; k < nruns; k++) {
    if (posted[k]) shim_worker_wait(runs[k].comm->worker);
    else run_comm(&runs[k]);
  }
  ncclResult_t res = ncclSuccess;
  for (size_t k = 0; k < nruns && res == ncclSuccess; k++) {
    if (runs[k].res == ncclSuccess) continue;
    /* a worker recorded the failure as its own thread's: make it this thread's too */
    char text[1024];
    pthread_mutex_lock(&runs[k].comm->lock);
    snprintf(text, sizeof(text), "%s", runs[k].comm->last);
    pthread_mutex_unlock(&runs[k].comm->lock);
    res = shim_fail(NULL, runs[k].res, "%s", text);
  }
  if (runs != stack_runs) free(runs), free(posted);
  s->nqueue = 0;
  return res;
}

NCCL_API(ncclResult_t, GroupStart, void) {
  struct group_state* s = state();
  if (!s) return shim_fail(NULL, ncclSystemError, "ncclGroupStart: out of memory");
  s->depth++;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, GroupEnd, void) {
  struct group_state* s = gs;
  if (!s || s->depth == 0) return shim_fail(NULL, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--s->depth > 0) return ncclSuccess;
  ncclResult_t res = s->npending ? run_pending(s) : ncclSuccess;
  if (s->nqueue) {
    ncclResult_t q = res == ncclSuccess ? run_queue(s) : (s->nqueue = 0, res);
    if (res == ncclSuccess) res = q;
  }
  return res;
}

/* Simulation (a time estimate without running) is not provided: the group is ended as by
 * ncclGroupEnd, so its operations run, and the call says so with InvalidUsage. */
NCCL_API(ncclResult_t, GroupSimulateEnd, ncclSimInfo_t* simInfo) {
  ncclResult_t res = ncclGroupEnd();
  if (res != ncclSuccess) return res;
  if (simInfo) simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
  return shim_fail(NULL, ncclInvalidUsage, "ncclGroupSimulateEnd: this library does not simulate groups; the group was "
                   "ended as by ncclGroupEnd and its operations ran");
}
