/* executor.c - Executor(comm).execute(plan, input, output, input_size=-1, output_size=-1,
 * dtype=float32, stream=0): one call of a plan (NumPy buffers on CPU ranks, device pointers on GPU
 * ranks); ._execute_loop: the same call looped in C, the reference the binding's cost is measured
 * against (python/bench). */
#include "common.h"

#include <time.h>

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
  if (buf_sizes(in, out, isz, osz, "Executor.execute") < 0) return buf_release(in), buf_release(out), -1;
  if (!plan_of(*plan)) return buf_release(in), buf_release(out), -1;
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

PyTypeObject ExecutorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mscclpp._mscclpp.Executor",
    .tp_basicsize = sizeof(Executor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Runs execution plans on a communicator.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)exec_init,
    .tp_dealloc = (destructor)exec_dealloc,
    .tp_methods = exec_methods,
};

