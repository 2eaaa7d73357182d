/* torch_ops.c - the entry points of mscclpp.torch (the torch.distributed backend): one call per
 * torch operation, taking raw pointers, element counts and the stream as integers (METH_FASTCALL,
 * no argument objects built), releasing the GIL while the library works.
 *   _torch_comm(unique_id, rank, size, rank_kind, cuda_device, timeout_ms) -> CommGroup
 *   _torch_coll(kind, comm, send_ptr, recv_ptr, count, dtype, op, root, stream)
 *   _torch_premul(kind, comm, send_ptr, recv_ptr, count, dtype, scalar_ptr, residence, root, stream)
 *   _torch_p2p(comm, ops, stream): ops a sequence of (is_send, ptr, nbytes, peer), run as one group
 *   _torch_group_start(), _torch_group_end()
 * kind: 0 allreduce, 1 allgather, 2 reducescatter, 3 alltoall, 4 broadcast, 5 reduce, 6 send (peer in
 * root), 7 recv (peer in root, into recv_ptr). Counts are NCCL's (per rank for allgather,
 * reducescatter and alltoall). */
#include "common.h"

#include <string.h>

enum { K_ALLREDUCE, K_ALLGATHER, K_REDUCESCATTER, K_ALLTOALL, K_BROADCAST, K_REDUCE, K_SEND, K_RECV, K_COUNT };
static const char* const knames[K_COUNT] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                            "broadcast", "reduce",    "send",          "recv"};

static mscclppResult_t call(int k, mscclppComm_t c, const void* in, void* out, size_t n, mscclppDataType_t t,
                            mscclppRedOp_t op, int root, void* s) {
  switch (k) {
    case K_ALLREDUCE: return mscclppAllReduce(in, out, n, t, op, c, s);
    case K_ALLGATHER: return mscclppAllGather(in, out, n, t, c, s);
    case K_REDUCESCATTER: return mscclppReduceScatter(in, out, n, t, op, c, s);
    case K_ALLTOALL: return mscclppAllToAll(in, out, n, t, c, s);
    case K_BROADCAST: return mscclppBroadcast(in, out, n, t, root, c, s);
    case K_REDUCE: return mscclppReduce(in, out, n, t, op, root, c, s);
    case K_SEND: return mscclppSend(in, n, t, root, c, s);
    default: return mscclppRecv(out, n, t, root, c, s);
  }
}

/* Integer argument i of args, as a pointer-sized value; -1 with an exception set on error. */
static int arg_ptr(PyObject* const* args, int i, void** out) {
  *out = args[i] == Py_None ? NULL : PyLong_AsVoidPtr(args[i]);
  return PyErr_Occurred() ? -1 : 0;
}

static int arg_int(PyObject* const* args, int i, long long* out) {
  *out = PyLong_AsLongLong(args[i]);
  return PyErr_Occurred() ? -1 : 0;
}

static int nargs_ok(Py_ssize_t n, Py_ssize_t want, const char* fn) {
  if (n == want) return 0;
  PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", fn, want, n);
  return -1;
}

static mscclppComm_t arg_comm(PyObject* o, const char* fn) {
  if (!PyObject_TypeCheck(o, &CommGroupType)) {
    PyErr_Format(PyExc_TypeError, "%s: comm must be a CommGroup", fn);
    return NULL;
  }
  return comm_of((CommGroup*)o);
}

/* The common arguments: kind, comm, send, recv, count, dtype at 0..5, root at iroot, stream at istream. */
struct coll_args {
  long long kind, count, dtype, root;
  mscclppComm_t comm;
  void *send, *recv, *stream;
};

static int parse_common(PyObject* const* a, int iroot, int istream, struct coll_args* c, const char* fn) {
  if (arg_int(a, 0, &c->kind) < 0) return -1;
  if (c->kind < 0 || c->kind >= K_COUNT) {
    PyErr_Format(PyExc_ValueError, "%s: kind %lld is not 0..%d", fn, c->kind, K_COUNT - 1);
    return -1;
  }
  if (!(c->comm = arg_comm(a[1], fn))) return -1;
  if (arg_ptr(a, 2, &c->send) < 0 || arg_ptr(a, 3, &c->recv) < 0 || arg_int(a, 4, &c->count) < 0 ||
      arg_int(a, 5, &c->dtype) < 0 || arg_int(a, iroot, &c->root) < 0 || arg_ptr(a, istream, &c->stream) < 0)
    return -1;
  if (c->count < 0 || mscclppDataTypeSize((mscclppDataType_t)c->dtype) == 0) {
    PyErr_Format(PyExc_ValueError, "%s: count %lld / dtype %lld invalid", fn, c->count, c->dtype);
    return -1;
  }
  return 0;
}

static PyObject* py_torch_coll(PyObject* m, PyObject* const* args, Py_ssize_t nargs) {
  (void)m;
  struct coll_args c;
  long long op;
  if (nargs_ok(nargs, 9, "_torch_coll") < 0 || parse_common(args, 7, 8, &c, "_torch_coll") < 0 ||
      arg_int(args, 6, &op) < 0)
    return NULL;
  mscclppResult_t r;
  Py_BEGIN_ALLOW_THREADS;
  r = call((int)c.kind, c.comm, c.send, c.recv, (size_t)c.count, (mscclppDataType_t)c.dtype, (mscclppRedOp_t)op,
           (int)c.root, c.stream);
  Py_END_ALLOW_THREADS;
  if (r != mscclppSuccess) return lib_error(r, knames[c.kind]);
  Py_RETURN_NONE;
}

/* A pre-multiplied sum: the op made for this call (the scalar at scalar_ptr, of dtype; residence
 * 1 copies it now, 0 reads it at the call: device memory on GPU ranks), the call, the op destroyed
 * (the library resolves the op when the call is made, so a queued GPU call keeps its scalar). */
static PyObject* py_torch_premul(PyObject* m, PyObject* const* args, Py_ssize_t nargs) {
  (void)m;
  struct coll_args c;
  void* scalar;
  long long residence;
  if (nargs_ok(nargs, 10, "_torch_premul") < 0 || parse_common(args, 8, 9, &c, "_torch_premul") < 0 ||
      arg_ptr(args, 6, &scalar) < 0 || arg_int(args, 7, &residence) < 0)
    return NULL;
  mscclppResult_t r, r2 = mscclppSuccess;
  mscclppRedOp_t op;
  Py_BEGIN_ALLOW_THREADS;
  r = mscclppRedOpCreatePreMulSum(&op, scalar, (mscclppDataType_t)c.dtype, (mscclppScalarResidence_t)residence,
                                  c.comm);
  if (r == mscclppSuccess) {
    r = call((int)c.kind, c.comm, c.send, c.recv, (size_t)c.count, (mscclppDataType_t)c.dtype, op, (int)c.root,
             c.stream);
    r2 = mscclppRedOpDestroy(op, c.comm);
  }
  Py_END_ALLOW_THREADS;
  if (r != mscclppSuccess) return lib_error(r, knames[c.kind]);
  if (r2 != mscclppSuccess) return lib_error(r2, "premul_sum destroy");
  Py_RETURN_NONE;
}

/* One group of sends and receives of bytes: ops is a list or tuple of (is_send, ptr, nbytes, peer). */
struct p2p_op {
  int send, peer;
  void* ptr;
  size_t n;
};

static PyObject* py_torch_p2p(PyObject* m, PyObject* const* args, Py_ssize_t nargs) {
  (void)m;
  if (nargs_ok(nargs, 3, "_torch_p2p") < 0) return NULL;
  mscclppComm_t comm = arg_comm(args[0], "_torch_p2p");
  void* stream;
  if (!comm || arg_ptr(args, 2, &stream) < 0) return NULL;
  PyObject* seq = PySequence_Fast(args[1], "_torch_p2p: ops must be a sequence");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  struct p2p_op local[16];
  struct p2p_op* ops = n <= 16 ? local : PyMem_Malloc((size_t)n * sizeof(*ops));
  if (!ops) return Py_DECREF(seq), PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* t = PySequence_Fast_GET_ITEM(seq, i);
    long long send, nb, peer;
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
      PyErr_SetString(PyExc_TypeError, "_torch_p2p: each op is a tuple (is_send, ptr, nbytes, peer)");
      goto fail;
    }
    PyObject* const* f = &PyTuple_GET_ITEM(t, 0);
    if (arg_int(f, 0, &send) < 0 || arg_ptr(f, 1, &ops[i].ptr) < 0 || arg_int(f, 2, &nb) < 0 ||
        arg_int(f, 3, &peer) < 0)
      goto fail;
    if (nb < 0) {
      PyErr_SetString(PyExc_ValueError, "_torch_p2p: negative size");
      goto fail;
    }
    ops[i].send = send != 0, ops[i].n = (size_t)nb, ops[i].peer = (int)peer;
  }
  Py_DECREF(seq);
  mscclppResult_t r, r2;
  int bad = -1;
  Py_BEGIN_ALLOW_THREADS;
  r = mscclppGroupStart();
  int started = r == mscclppSuccess;
  for (Py_ssize_t i = 0; r == mscclppSuccess && i < n; i++) {
    r = ops[i].send ? mscclppSend(ops[i].ptr, ops[i].n, mscclppUint8, ops[i].peer, comm, stream)
                    : mscclppRecv(ops[i].ptr, ops[i].n, mscclppUint8, ops[i].peer, comm, stream);
    if (r != mscclppSuccess) bad = (int)i;
  }
  /* the group is always closed once opened (a failed call inside it fails the group too) */
  r2 = started ? mscclppGroupEnd() : mscclppSuccess;
  Py_END_ALLOW_THREADS;
  if (ops != local) PyMem_Free(ops);
  if (r != mscclppSuccess) {
    return bad >= 0 ? lib_error(r, "send/recv") : lib_error(r, "group start");
  }
  if (r2 != mscclppSuccess) return lib_error(r2, "send/recv group");
  Py_RETURN_NONE;
fail:
  Py_DECREF(seq);
  if (ops != local) PyMem_Free(ops);
  return NULL;
}

static PyObject* py_torch_group_start(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  mscclppResult_t r = mscclppGroupStart();
  if (r != mscclppSuccess) return lib_error(r, "group start");
  Py_RETURN_NONE;
}

static PyObject* py_torch_group_end(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  mscclppResult_t r;
  Py_BEGIN_ALLOW_THREADS;
  r = mscclppGroupEnd();
  Py_END_ALLOW_THREADS;
  if (r != mscclppSuccess) return lib_error(r, "group end");
  Py_RETURN_NONE;
}

/* A communicator of the given rank kind (0 auto, 1 CPU, 2 GPU) on cuda_device (-1: current), every
 * bootstrap wait bounded by timeout_ms (0: the library's default). */
static PyObject* py_torch_comm(PyObject* m, PyObject* const* args, Py_ssize_t nargs) {
  (void)m;
  if (nargs_ok(nargs, 6, "_torch_comm") < 0) return NULL;
  long long rank, size, kind, dev, tmo;
  if (arg_int(args, 1, &rank) < 0 || arg_int(args, 2, &size) < 0 || arg_int(args, 3, &kind) < 0 ||
      arg_int(args, 4, &dev) < 0 || arg_int(args, 5, &tmo) < 0)
    return NULL;
  char* id;
  Py_ssize_t idlen;
  if (PyBytes_AsStringAndSize(args[0], &id, &idlen) < 0) return NULL;
  if (idlen != MSCCLPP_UNIQUE_ID_BYTES)
    return PyErr_Format(PyExc_ValueError, "_torch_comm: unique_id has %zd bytes, not %d", idlen,
                        MSCCLPP_UNIQUE_ID_BYTES);
  if (size < 1 || rank < 0 || rank >= size || kind < 0 || kind > 2 || tmo < 0 || tmo > 0x7fffffff)
    return PyErr_Format(PyExc_ValueError, "_torch_comm: rank %lld size %lld kind %lld timeout %lld", rank, size,
                        kind, tmo);
  mscclppUniqueId uid;
  memcpy(uid.internal, id, sizeof(uid.internal));
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = (int)kind, cfg.cudaDevice = (int)dev, cfg.bootstrapTimeoutMs = (int)tmo;
  CommGroup* self = (CommGroup*)PyType_GenericNew(&CommGroupType, NULL, NULL);
  if (!self) return NULL;
  mscclppComm_t comm = NULL;
  mscclppResult_t r;
  Py_BEGIN_ALLOW_THREADS;
  r = mscclppCommInitRankConfig(&comm, (int)size, uid, (int)rank, &cfg);
  Py_END_ALLOW_THREADS;
  if (r != mscclppSuccess) return Py_DECREF(self), lib_error(r, "mscclpp.torch communicator");
  self->comm = comm;
  (void)mscclppCommRank(comm, &self->rank);
  (void)mscclppCommSize(comm, &self->nranks);
  return (PyObject*)self;
}

static PyMethodDef torch_methods[] = {
    {"_torch_comm", (PyCFunction)(void (*)(void))py_torch_comm, METH_FASTCALL,
     "_torch_comm(unique_id, rank, size, rank_kind, cuda_device, timeout_ms) -> CommGroup"},
    {"_torch_coll", (PyCFunction)(void (*)(void))py_torch_coll, METH_FASTCALL,
     "_torch_coll(kind, comm, send_ptr, recv_ptr, count, dtype, op, root, stream)"},
    {"_torch_premul", (PyCFunction)(void (*)(void))py_torch_premul, METH_FASTCALL,
     "_torch_premul(kind, comm, send_ptr, recv_ptr, count, dtype, scalar_ptr, residence, root, stream)"},
    {"_torch_p2p", (PyCFunction)(void (*)(void))py_torch_p2p, METH_FASTCALL,
     "_torch_p2p(comm, [(is_send, ptr, nbytes, peer), ...], stream): one group of byte sends/receives"},
    {"_torch_group_start", py_torch_group_start, METH_NOARGS, "mscclppGroupStart()"},
    {"_torch_group_end", py_torch_group_end, METH_NOARGS, "mscclppGroupEnd() (releases the GIL)"},
    {NULL, NULL, 0, NULL}};

/* Called from PyInit__mscclpp (module.c). */
int torch_ops_add(PyObject* m);
int torch_ops_add(PyObject* m) { return PyModule_AddFunctions(m, torch_methods); }
