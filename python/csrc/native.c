/* native.c - native algorithms from Python (include/mscclpp/native_algorithm.h): a factory of a
 * library that mscclpp.compile_native built is called by address and its def wrapped in a capsule;
 * NativeAlgorithm(capsule) makes the library's handle of it, with .name, .collective,
 * .execute(comm, input, output, ...) and .release(comm). The package's Algorithm class wraps it
 * (Algorithm.create_from_native_capsule). */
#include "native.h"

#include <string.h>

#include <mscclpp/native_algorithm.h>

typedef struct {
  PyObject_HEAD mscclppNativeAlgorithm_t algo;
  PyObject* capsule; /* keeps the factory's library loaded */
} NativeAlgorithm;

typedef const mscclppNativeAlgorithmDef* (*factory_fn)(void);

static void capsule_free(PyObject* cap) { Py_XDECREF((PyObject*)PyCapsule_GetContext(cap)); }

PyObject* py_native_factory_call(PyObject* m, PyObject* args) {
  (void)m;
  PyObject *addr, *owner;
  if (!PyArg_ParseTuple(args, "O!O", &PyLong_Type, &addr, &owner)) return NULL;
  void* p = PyLong_AsVoidPtr(addr);
  if (p == NULL) return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "native factory: address 0");
  factory_fn f;
  memcpy(&f, &p, sizeof(f)); /* a data pointer that holds a function's address (dlsym's convention) */
  const mscclppNativeAlgorithmDef* def = f();
  if (def == NULL) return PyErr_Format(PyExc_RuntimeError, "native factory: it returned NULL (no algorithm)");
  PyObject* cap = PyCapsule_New((void*)def, NATIVE_CAPSULE_NAME, capsule_free);
  if (cap == NULL) return NULL;
  Py_INCREF(owner);
  if (PyCapsule_SetContext(cap, owner) < 0) {
    Py_DECREF(owner);
    Py_DECREF(cap);
    return NULL;
  }
  return cap;
}

static int na_init(NativeAlgorithm* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"capsule", NULL};
  PyObject* cap;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O", names, &cap)) return -1;
  if (!PyCapsule_IsValid(cap, NATIVE_CAPSULE_NAME)) {
    PyErr_Format(PyExc_TypeError, "NativeAlgorithm: expected a capsule named '%s' (what a compile_native factory "
                 "returns), got %R", NATIVE_CAPSULE_NAME, cap);
    return -1;
  }
  const mscclppNativeAlgorithmDef* def = PyCapsule_GetPointer(cap, NATIVE_CAPSULE_NAME);
  mscclppNativeAlgorithm_t algo = NULL;
  mscclppResult_t r = mscclppNativeAlgorithmCreate(def, &algo);
  if (r != mscclppSuccess) return lib_error(r, "Algorithm.create_from_native_capsule"), -1;
  if (self->algo) (void)mscclppNativeAlgorithmDestroy(self->algo);
  self->algo = algo;
  Py_INCREF(cap);
  Py_XSETREF(self->capsule, cap);
  return 0;
}

static void na_dealloc(NativeAlgorithm* self) {
  if (self->algo) (void)mscclppNativeAlgorithmDestroy(self->algo);
  Py_XDECREF(self->capsule);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static mscclppNativeAlgorithm_t algo_of(NativeAlgorithm* self) {
  if (!self->algo) PyErr_SetString(PyExc_RuntimeError, "NativeAlgorithm: not made from a capsule");
  return self->algo;
}

/* extras (None or a dict of str -> int) as an array (PyMem; *n entries) whose names point into
 * *keep (a list holding the keys). 0, or -1 with an exception. */
static int extras_get(PyObject* extras, mscclppNativeExtra** out, int* n, PyObject** keep) {
  *out = NULL, *n = 0, *keep = NULL;
  if (extras == NULL || extras == Py_None) return 0;
  if (!PyDict_Check(extras)) return PyErr_Format(PyExc_TypeError, "execute: extras must be a dict of str to int"), -1;
  Py_ssize_t len = PyDict_Size(extras);
  if (len > 1 << 20) return PyErr_Format(PyExc_ValueError, "execute: %zd extras", len), -1;
  *keep = PyDict_Items(extras);
  *out = PyMem_Calloc((size_t)(len ? len : 1), sizeof(**out));
  if (*keep == NULL || *out == NULL) return PyErr_NoMemory(), -1;
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject* item = PyList_GET_ITEM(*keep, i);
    PyObject *k = PyTuple_GET_ITEM(item, 0), *v = PyTuple_GET_ITEM(item, 1);
    if (!PyUnicode_Check(k) || !PyLong_Check(v))
      return PyErr_Format(PyExc_TypeError, "execute: extras[%R] = %R: names are str and values int", k, v), -1;
    (*out)[i].name = PyUnicode_AsUTF8(k);
    (*out)[i].value = (uintptr_t)PyLong_AsVoidPtr(v);
    if ((*out)[i].name == NULL || PyErr_Occurred()) return -1;
  }
  *n = (int)len;
  return 0;
}

static PyObject* na_execute(NativeAlgorithm* self, PyObject* args, PyObject* kw) {
  static char* kwnames[] = {"comm", "input", "output", "input_size", "output_size", "dtype", "op", "stream",
                            "nblocks", "nthreads_per_block", "extras", NULL};
  PyObject *pc, *pi, *po, *st = NULL, *ex = NULL;
  Py_ssize_t isz = -1, osz = -1;
  int dtype = mscclppFloat32, op = (int)MSCCLPP_NATIVE_OP_NONE, nblocks = 0, nthreads = 0, nextras = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OO|nniiOiiO", kwnames, &CommGroupType, &pc, &pi, &po, &isz, &osz,
                                   &dtype, &op, &st, &nblocks, &nthreads, &ex))
    return NULL;
  void* stream = st && st != Py_None ? PyLong_AsVoidPtr(st) : NULL;
  mscclppComm_t c = comm_of((CommGroup*)pc);
  mscclppNativeAlgorithm_t algo = algo_of(self);
  if (PyErr_Occurred() || !c || !algo) return NULL;
  struct buf_arg in, out;
  mscclppNativeExtra* extras = NULL;
  PyObject* keep = NULL;
  PyObject* ret = NULL;
  if (buf_get(pi, 0, &in) < 0) return NULL;
  if (buf_get(po, 1, &out) < 0) return buf_release(&in), NULL;
  if (buf_sizes(&in, &out, &isz, &osz, "execute") == 0 && extras_get(ex, &extras, &nextras, &keep) == 0) {
    mscclppResult_t r;
    Py_BEGIN_ALLOW_THREADS;
    r = mscclppNativeAlgorithmExecute(c, algo, in.ptr, out.ptr, (size_t)isz, (size_t)osz, (mscclppDataType_t)dtype,
                                      (mscclppRedOp_t)op, stream, nblocks, nthreads, extras, nextras);
    Py_END_ALLOW_THREADS;
    ret = r == mscclppSuccess ? (Py_INCREF(Py_None), Py_None) : lib_error(r, "Algorithm.execute");
  }
  PyMem_Free(extras);
  Py_XDECREF(keep);
  buf_release(&in), buf_release(&out);
  return ret;
}

static PyObject* na_release(NativeAlgorithm* self, PyObject* arg) {
  if (!PyObject_TypeCheck(arg, &CommGroupType))
    return PyErr_Format(PyExc_TypeError, "release: expected a CommGroup, got %R", arg);
  mscclppComm_t c = comm_of((CommGroup*)arg);
  mscclppNativeAlgorithm_t algo = algo_of(self);
  if (!c || !algo) return NULL;
  mscclppResult_t r;
  Py_BEGIN_ALLOW_THREADS;
  r = mscclppNativeAlgorithmRelease(c, algo);
  Py_END_ALLOW_THREADS;
  return r == mscclppSuccess ? (Py_INCREF(Py_None), Py_None) : lib_error(r, "Algorithm.release");
}

/* .name or .collective (closure: which). */
static PyObject* na_get(NativeAlgorithm* self, void* which) {
  const char *name = NULL, *coll = NULL;
  if (!algo_of(self)) return NULL;
  mscclppResult_t r = mscclppNativeAlgorithmInfo(self->algo, &name, &coll);
  if (r != mscclppSuccess) return lib_error(r, "NativeAlgorithm");
  return PyUnicode_FromString(strcmp(which, "name") == 0 ? name : coll);
}

static PyGetSetDef na_getset[] = {
    {"name", (getter)na_get, NULL, "the algorithm's name", "name"},
    {"collective", (getter)na_get, NULL, "the collective it implements", "collective"},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef na_methods[] = {
    {"execute", (PyCFunction)(void (*)(void))na_execute, METH_VARARGS | METH_KEYWORDS,
     "execute(comm, input, output, input_size=-1, output_size=-1, dtype=float32, op=NOP, stream=0, nblocks=0, "
     "nthreads_per_block=0, extras=None): one call (init and the call's context first where needed)."},
    {"release", (PyCFunction)na_release, METH_O,
     "release(comm): tears down the algorithm's state on comm now (as the communicator's destruction would)."},
    {NULL, NULL, 0, NULL}};

PyTypeObject NativeAlgorithmType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mscclpp._mscclpp.NativeAlgorithm",
    .tp_basicsize = sizeof(NativeAlgorithm),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A native algorithm (a compile_native factory's capsule) as the library runs it.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)na_init,
    .tp_dealloc = (destructor)na_dealloc,
    .tp_methods = na_methods,
    .tp_getset = na_getset,
};
