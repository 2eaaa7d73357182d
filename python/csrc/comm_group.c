/* comm_group.c - CommGroup: a communicator of CPU or GPU ranks, made from "interface:ip:port" or
 * "host:port" (rank 0 starts the root there), from a unique id (get_unique_id()), or from the
 * launcher's environment when neither is given; .my_rank, .nranks, .communicator, .barrier(),
 * .all_gather_bytes(b) -> [bytes], .close(); a context manager. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#include <structmember.h>

/* The root's "host:port" from interfaceIpPortTrio: "interface:ip:port" (the MSCCL++ seeds' form;
 * the interface then becomes MSCCLPP_SOCKET_IFNAME unless that is set), or "host:port" /
 * "[v6]:port". 0, or -1 with ValueError. */
static int root_address(const char* trio, char* out, size_t len) {
  const char* first = strchr(trio, ':');
  int colons = 0;
  for (const char* p = trio; *p; p++) colons += *p == ':';
  if (!first || strlen(trio) >= len) {
    PyErr_Format(PyExc_ValueError, "CommGroup: interfaceIpPortTrio '%s' is not interface:ip:port or ip:port", trio);
    return -1;
  }
  if (colons == 2 && trio[0] != '[') {
    char iface[64];
    snprintf(iface, sizeof(iface), "%.*s", (int)(first - trio), trio);
    setenv("MSCCLPP_SOCKET_IFNAME", iface, 0);
    trio = first + 1;
  }
  snprintf(out, len, "%s", trio);
  return 0;
}

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
  char where[512];
  if (trio && root_address(trio, where, sizeof(where)) < 0) {
    if (id.buf) PyBuffer_Release(&id);
    return -1;
  }
  Py_BEGIN_ALLOW_THREADS;
  if (trio) r = mscclppCommInitRank(&comm, size, where, rank);
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

mscclppComm_t comm_of(CommGroup* self) {
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

/* The seeds pass comm_group.communicator where a communicator is wanted: the group itself. */
static PyObject* comm_communicator(CommGroup* self, void* unused) {
  (void)unused;
  Py_INCREF(self);
  return (PyObject*)self;
}

static PyGetSetDef comm_getset[] = {{"communicator", (getter)comm_communicator, NULL, "the communicator (this group)", NULL},
                                    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef comm_members[] = {
    {"my_rank", T_INT, offsetof(CommGroup, rank), READONLY, "this rank"},
    {"nranks", T_INT, offsetof(CommGroup, nranks), READONLY, "ranks of the communicator"},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject CommGroupType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mscclpp._mscclpp.CommGroup",
    .tp_basicsize = sizeof(CommGroup),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A communicator of ranks (CPU or GPU), made from host:port, a unique id or the environment.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)comm_init,
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_methods = comm_methods,
    .tp_members = comm_members,
    .tp_getset = comm_getset,
};

