/* module.c - mscclpp._mscclpp, the CPython binding of the C library's public API (the package's
 * python/mscclpp/__init__.py builds the Python-facing names on it):
 *
 *   CommGroup(interfaceIpPortTrio=None, rank=-1, size=-1, unique_id=None)
 *       a communicator: from "host:port" (rank 0 starts the root there), from a unique id
 *       (get_unique_id()), or from the launcher's environment when neither is given.
 *       .my_rank, .nranks, .barrier(), .all_gather_bytes(b) -> [bytes], .close()
 *   ExecutionPlan(path=None, json=None, name="plan")   .name .collective .nranks .inplace
 *       .min_message_size .max_message_size
 *   Executor(comm).execute(plan, input, output, input_size=-1, output_size=-1, dtype=7, stream=0)
 *       input/output: objects with the buffer protocol (NumPy arrays: CPU ranks) or integers
 *       (device pointers: GPU ranks)
 *   get_unique_id() -> bytes, version() -> int, _execute_loop(...): the C-side timing reference
 *
 * Every failure raises RuntimeError (ValueError for arguments) with the library's detailed
 * message. Calls that may wait (init, barrier, execute) release the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

#include <mscclpp/collectives.h>
#include <mscclpp/comm.h>
#include <mscclpp/core.h>
#include <mscclpp/executor.h>

/* Raises for a failed library call: ValueError for argument errors, RuntimeError otherwise. */
static PyObject* lib_error(mscclppResult_t r, const char* what) {
  PyObject* type = r == mscclppInvalidArgument ? PyExc_ValueError : PyExc_RuntimeError;
  PyErr_Format(type, "%s: %s (%s)", what, mscclppGetLastError(), mscclppGetErrorString(r));
  return NULL;
}

/* ---- CommGroup -------------------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD mscclppComm_t comm;
  int rank, nranks;
} CommGroup;

static int comm_init(CommGroup* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"interfaceIpPortTrio", "rank", "size", "unique_id", NULL};
  const char* trio = NULL;
  int rank = -1, size = -1;
  Py_buffer id = {0};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|ziiy*", names, &trio, &rank, &size, &id)) return -1;
  if (self->comm) {
    PyErr_SetString(PyExc_RuntimeError, "CommGroup: already initialised");
    return -1;
  }
  mscclppResult_t r;
  if (id.buf && id.len != MSCCLPP_UNIQUE_ID_BYTES) {
    PyErr_Format(PyExc_ValueError, "CommGroup: unique_id has %zd bytes, not %d", id.len, MSCCLPP_UNIQUE_ID_BYTES);
    PyBuffer_Release(&id);
    return -1;
  }
  if ((trio || id.buf) && (rank < 0 || size < 1 || rank >= size)) {
    PyErr_Format(PyExc_ValueError, "CommGroup: rank %d of size %d (0 <= rank < size)", rank, size);
    if (id.buf) PyBuffer_Release(&id);
    return -1;
  }
  mscclppComm_t comm = NULL;
  mscclppUniqueId uid;
  if (id.buf) memcpy(uid.internal, id.buf, sizeof(uid.internal));
  Py_BEGIN_ALLOW_THREADS;
  if (trio) r = mscclppCommInitRank(&comm, size, trio, rank);
  else if (id.buf) r = mscclppCommInitRankFromId(&comm, size, uid, rank);
  else r = mscclppCommInitFromEnv(&comm, NULL);
  Py_END_ALLOW_THREADS;
  if (id.buf) PyBuffer_Release(&id);
  if (r != mscclppSuccess) return lib_error(r, "CommGroup"), -1;
  self->comm = comm;
  (void)mscclppCommRank(comm, &self->rank);
  (void)mscclppCommSize(comm, &self->nranks);
  return 0;
}

/* The live communicator, or NULL with an exception set. */
static mscclppComm_t comm_of(CommGroup* self) {
  if (!self->comm) PyErr_SetString(PyExc_RuntimeError, "CommGroup: closed");
  return self->comm;
}

static PyObject* comm_close(CommGroup* self, PyObject* unused) {
  (void)unused;
  if (self->comm) {
    mscclppComm_t c = self->comm;
    self->comm = NULL;
    mscclppResult_t r;
    Py_BEGIN_ALLOW_THREADS;
    r = mscclppCommDestroy(c);
    Py_END_ALLOW_THREADS;
    if (r != mscclppSuccess) return lib_error(r, "CommGroup.close");
  }
  Py_RETURN_NONE;
}

static void comm_dealloc(CommGroup* self) {
  if (self->comm) (void)mscclppCommDestroy(self->comm);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* comm_barrier(CommGroup* self, PyObject* unused) {
  (void)unused;
  mscclppComm_t c = comm_of(self);
  if (!c) return NULL;
  mscclppResult_t r;
  Py_BEGIN_ALLOW_THREADS;
  r = mscclppBootstrapBarrier(c);
  Py_END_ALLOW_THREADS;
  return r == mscclppSuccess ? (Py_INCREF(Py_None), Py_None) : lib_error(r, "CommGroup.barrier");
}

/* Every rank's bytes (all the same length), in rank order. */
static PyObject* comm_all_gather_bytes(CommGroup* self, PyObject* arg) {
  mscclppComm_t c = comm_of(self);
  if (!c) return NULL;
  Py_buffer b;
  if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
  if (b.len > INT32_MAX / self->nranks) {
    PyBuffer_Release(&b);
    return PyErr_Format(PyExc_ValueError, "CommGroup.all_gather_bytes: %zd bytes per rank is too many", b.len);
  }
  char* all = PyMem_Malloc((size_t)b.len * (size_t)self->nranks + 1);
  if (!all) {
    PyBuffer_Release(&b);
    return PyErr_NoMemory();
  }
  memcpy(all + (size_t)b.len * (size_t)self->rank, b.buf, (size_t)b.len);
  mscclppResult_t r;
  int len = (int)b.len;
  PyBuffer_Release(&b);
  Py_BEGIN_ALLOW_THREADS;
  r = mscclppBootstrapAllGather(c, all, len);
  Py_END_ALLOW_THREADS;
  PyObject* out = r == mscclppSuccess ? PyList_New(self->nranks) : NULL;
  for (int i = 0; out && i < self->nranks; i++) {
    PyObject* item = PyBytes_FromStringAndSize(all + (size_t)len * (size_t)i, len);
    if (!item) Py_CLEAR(out);
    else PyList_SET_ITEM(out, i, item);
  }
  PyMem_Free(all);
  return r == mscclppSuccess ? out : lib_error(r, "CommGroup.all_gather_bytes");
}

static PyObject* comm_enter(CommGroup* self, PyObject* unused) {
  (void)unused;
  Py_INCREF(self);
  return (PyObject*)self;
}

static PyObject* comm_exit(CommGroup* self, PyObject* args) {
  (void)args;
  return comm_close(self, NULL);
}

static PyMethodDef comm_methods[] = {
    {"barrier", (PyCFunction)comm_barrier, METH_NOARGS, "Returns once every rank has entered it."},
    {"all_gather_bytes", (PyCFunction)comm_all_gather_bytes, METH_O, "Every rank's bytes (same length), in rank order."},
    {"close", (PyCFunction)comm_close, METH_NOARGS, "Destroys the communicator."},
    {"__enter__", (PyCFunction)comm_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)comm_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyMemberDef comm_members[] = {
    {"my_rank", T_INT, offsetof(CommGroup, rank), READONLY, "this rank"},
    {"nranks", T_INT, offsetof(CommGroup, nranks), READONLY, "ranks of the communicator"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject CommGroupType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mscclpp._mscclpp.CommGroup",
    .tp_basicsize = sizeof(CommGroup),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A communicator of ranks (CPU or GPU), made from host:port, a unique id or the environment.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)comm_init,
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_methods = comm_methods,
    .tp_members = comm_members,
};

/* ---- ExecutionPlan ---------------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD mscclppPlan_t plan;
} Plan;

static int plan_init(Plan* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"path", "json", "name", NULL};
  const char *path = NULL, *name = "plan";
  Py_buffer json = {0};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|zz*z", names, &path, &json, &name)) return -1;
  if ((path == NULL) == (json.buf == NULL)) {
    if (json.buf) PyBuffer_Release(&json);
    PyErr_SetString(PyExc_ValueError, "ExecutionPlan: give one of path and json");
    return -1;
  }
  if (self->plan) (void)mscclppPlanDestroy(self->plan), self->plan = NULL;
  mscclppResult_t r = path ? mscclppPlanLoadFile(path, &self->plan)
                           : mscclppPlanLoadString(json.buf, (size_t)json.len, name ? name : "plan", &self->plan);
  if (json.buf) PyBuffer_Release(&json);
  return r == mscclppSuccess ? 0 : (lib_error(r, "ExecutionPlan"), -1);
}

static void plan_dealloc(Plan* self) {
  if (self->plan) (void)mscclppPlanDestroy(self->plan);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* One field of the plan's info, by name (closure). */
static PyObject* plan_get(Plan* self, void* field) {
  mscclppPlanInfo_t info;
  mscclppResult_t r = mscclppPlanInfo(self->plan, &info);
  if (r != mscclppSuccess) return lib_error(r, "ExecutionPlan");
  const char* f = field;
  if (!strcmp(f, "name")) return PyUnicode_FromString(info.name);
  if (!strcmp(f, "collective")) return PyUnicode_FromString(info.collective);
  if (!strcmp(f, "nranks")) return PyLong_FromLong(info.nranks);
  if (!strcmp(f, "inplace")) return PyBool_FromLong(info.inplace);
  if (!strcmp(f, "min_message_size")) return PyLong_FromUnsignedLongLong(info.minMessageSize);
  return PyLong_FromUnsignedLongLong(info.maxMessageSize);
}

static PyGetSetDef plan_getset[] = {
    {"name", (getter)plan_get, NULL, "the plan's name", "name"},
    {"collective", (getter)plan_get, NULL, "the collective it implements", "collective"},
    {"nranks", (getter)plan_get, NULL, "ranks it is written for", "nranks"},
    {"inplace", (getter)plan_get, NULL, "whether it runs in place", "inplace"},
    {"min_message_size", (getter)plan_get, NULL, "smallest message it serves (bytes)", "min_message_size"},
    {"max_message_size", (getter)plan_get, NULL, "largest message it serves (bytes)", "max_message_size"},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mscclpp._mscclpp.ExecutionPlan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "An execution plan (the MSCCL++ executor's JSON), loaded and validated.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_getset = plan_getset,
};

/* ---- Executor --------------------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD CommGroup* comm;
} Executor;

static int exec_init(Executor* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"communicator", NULL};
  PyObject* c;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!", names, &CommGroupType, &c)) return -1;
  Py_INCREF(c);
  Py_XSETREF(self->comm, (CommGroup*)c);
  return 0;
}

static void exec_dealloc(Executor* self) {
  Py_XDECREF(self->comm);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* A buffer argument: an integer (a device pointer; size must be given) or an object with the
 * buffer protocol (writable when out). */
struct buf_arg {
  Py_buffer view;
  void* ptr;
  Py_ssize_t len; /* -1: unknown (a pointer) */
};

static int buf_get(PyObject* o, int out, struct buf_arg* b) {
  memset(b, 0, sizeof(*b));
  b->len = -1;
  if (PyLong_Check(o)) {
    b->ptr = PyLong_AsVoidPtr(o);
    return PyErr_Occurred() ? -1 : 0;
  }
  if (PyObject_GetBuffer(o, &b->view, out ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) < 0) return -1;
  b->ptr = b->view.buf, b->len = b->view.len;
  return 0;
}

static void buf_release(struct buf_arg* b) {
  if (b->view.obj) PyBuffer_Release(&b->view);
}

/* Parses execute's arguments into the plan, buffers, sizes, datatype and stream. */
static int exec_args(PyObject* args, PyObject* kw, Plan** plan, struct buf_arg* in, struct buf_arg* out,
                     Py_ssize_t* isz, Py_ssize_t* osz, int* dtype, void** stream) {
  static char* names[] = {"plan", "input", "output", "input_size", "output_size", "dtype", "stream", NULL};
  PyObject *pi, *po, *st = NULL;
  *isz = *osz = -1, *dtype = mscclppFloat32;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OO|nniO", names, &PlanType, plan, &pi, &po, isz, osz, dtype, &st))
    return -1;
  *stream = st && st != Py_None ? PyLong_AsVoidPtr(st) : NULL;
  if (PyErr_Occurred()) return -1;
  if (buf_get(pi, 0, in) < 0) return -1;
  if (buf_get(po, 1, out) < 0) return buf_release(in), -1;
  if (*isz < 0) *isz = in->len;
  if (*osz < 0) *osz = out->len;
  if (*isz < 0 || *osz < 0) {
    buf_release(in), buf_release(out);
    PyErr_SetString(PyExc_ValueError, "Executor.execute: give input_size and output_size with pointer buffers");
    return -1;
  }
  if ((in->len >= 0 && *isz > in->len) || (out->len >= 0 && *osz > out->len)) {
    buf_release(in), buf_release(out);
    PyErr_Format(PyExc_ValueError, "Executor.execute: sizes %zd and %zd exceed the buffers' %zd and %zd bytes", *isz,
                 *osz, in->len, out->len);
    return -1;
  }
  return 0;
}

static PyObject* exec_execute(Executor* self, PyObject* args, PyObject* kw) {
  Plan* plan;
  struct buf_arg in, out;
  Py_ssize_t isz, osz;
  int dtype;
  void* stream;
  if (exec_args(args, kw, &plan, &in, &out, &isz, &osz, &dtype, &stream) < 0) return NULL;
  mscclppComm_t c = comm_of(self->comm);
  mscclppResult_t r = mscclppSuccess;
  if (c) {
    Py_BEGIN_ALLOW_THREADS;
    r = mscclppExecutePlan(c, plan->plan, in.ptr, out.ptr, (size_t)isz, (size_t)osz, (mscclppDataType_t)dtype, stream);
    Py_END_ALLOW_THREADS;
  }
  buf_release(&in), buf_release(&out);
  if (!c) return NULL;
  return r == mscclppSuccess ? (Py_INCREF(Py_None), Py_None) : lib_error(r, "Executor.execute");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* _execute_loop(plan, input, output, iters, ...): iters calls made from C, the mean seconds per
 * call: the reference that Python's own loop of execute() is compared with (bench/). */
static PyObject* exec_loop(Executor* self, PyObject* args, PyObject* kw) {
  PyObject* rest = PyTuple_GetSlice(args, 0, 3);
  long iters = PyLong_AsLong(PyTuple_GetItem(args, 3));
  if (!rest || PyErr_Occurred() || iters < 1) {
    Py_XDECREF(rest);
    return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "_execute_loop: iters must be >= 1");
  }
  Plan* plan;
  struct buf_arg in, out;
  Py_ssize_t isz, osz;
  int dtype;
  void* stream;
  int bad = exec_args(rest, kw, &plan, &in, &out, &isz, &osz, &dtype, &stream);
  Py_DECREF(rest);
  if (bad < 0) return NULL;
  mscclppComm_t c = comm_of(self->comm);
  mscclppResult_t r = mscclppSuccess;
  double t = 0;
  if (c) {
    Py_BEGIN_ALLOW_THREADS;
    double t0 = now_s();
    for (long i = 0; i < iters && r == mscclppSuccess; i++)
      r = mscclppExecutePlan(c, plan->plan, in.ptr, out.ptr, (size_t)isz, (size_t)osz, (mscclppDataType_t)dtype, stream);
    t = (now_s() - t0) / (double)iters;
    Py_END_ALLOW_THREADS;
  }
  buf_release(&in), buf_release(&out);
  if (!c) return NULL;
  return r == mscclppSuccess ? PyFloat_FromDouble(t) : lib_error(r, "Executor._execute_loop");
}

static PyMethodDef exec_methods[] = {
    {"execute", (PyCFunction)(void (*)(void))exec_execute, METH_VARARGS | METH_KEYWORDS,
     "execute(plan, input, output, input_size=-1, output_size=-1, dtype=float32, stream=0): one call of the plan."},
    {"_execute_loop", (PyCFunction)(void (*)(void))exec_loop, METH_VARARGS | METH_KEYWORDS,
     "_execute_loop(plan, input, output, iters, ...): iters calls from C; mean seconds per call."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ExecutorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mscclpp._mscclpp.Executor",
    .tp_basicsize = sizeof(Executor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Runs execution plans on a communicator.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)exec_init,
    .tp_dealloc = (destructor)exec_dealloc,
    .tp_methods = exec_methods,
};

/* ---- module ----------------------------------------------------------------------------------- */

static PyObject* mod_unique_id(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  mscclppUniqueId id;
  mscclppResult_t r = mscclppGetUniqueId(&id);
  if (r != mscclppSuccess) return lib_error(r, "get_unique_id");
  return PyBytes_FromStringAndSize(id.internal, sizeof(id.internal));
}

static PyObject* mod_version(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  int v = 0;
  mscclppResult_t r = mscclppGetVersion(&v);
  return r == mscclppSuccess ? PyLong_FromLong(v) : lib_error(r, "version");
}

static PyMethodDef mod_methods[] = {
    {"get_unique_id", mod_unique_id, METH_NOARGS, "A unique id (bytes) for CommGroup(unique_id=...); starts the root here."},
    {"version", mod_version, METH_NOARGS, "The C library's version."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_mscclpp", "Bindings of the mscclpp C library.", -1,
                                    mod_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__mscclpp(void) {
  PyTypeObject* types[] = {&CommGroupType, &PlanType, &ExecutorType};
  const char* names[] = {"CommGroup", "ExecutionPlan", "Executor"};
  for (int i = 0; i < 3; i++)
    if (PyType_Ready(types[i]) < 0) return NULL;
  PyObject* m = PyModule_Create(&module);
  for (int i = 0; m && i < 3; i++) {
    Py_INCREF(types[i]);
    if (PyModule_AddObject(m, names[i], (PyObject*)types[i]) < 0) {
      Py_DECREF(types[i]);
      Py_CLEAR(m);
    }
  }
  return m;
}
