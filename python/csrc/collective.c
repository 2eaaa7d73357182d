/* collective.c - collective(name, comm, input, output, input_size=-1, output_size=-1, dtype=float32,
 * op=SUM, root=0, stream=0): the C library's collectives (which consult the plan registry, and
 * otherwise run its built-in algorithms), for the Algorithm objects of the package. The element
 * count comes from the sizes as NCCL counts it: allreduce, broadcast and reduce from the input;
 * allgather from the input (per rank); reducescatter from the output; alltoall from the input
 * divided among the ranks. */
#include "common.h"

#include <string.h>

enum { C_ALLREDUCE, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL, C_BROADCAST, C_REDUCE, C_COUNT };
static const char* const names[C_COUNT] = {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce"};

static mscclppResult_t run(int k, mscclppComm_t c, const void* in, void* out, size_t count, int dt, int op, int root,
                           void* stream) {
  mscclppDataType_t t = (mscclppDataType_t)dt;
  mscclppRedOp_t o = (mscclppRedOp_t)op;
  switch (k) {
    case C_ALLREDUCE: return mscclppAllReduce(in, out, count, t, o, c, stream);
    case C_ALLGATHER: return mscclppAllGather(in, out, count, t, c, stream);
    case C_REDUCESCATTER: return mscclppReduceScatter(in, out, count, t, o, c, stream);
    case C_ALLTOALL: return mscclppAllToAll(in, out, count, t, c, stream);
    case C_BROADCAST: return mscclppBroadcast(in, out, count, t, root, c, stream);
    default: return mscclppReduce(in, out, count, t, o, root, c, stream);
  }
}

PyObject* py_collective(PyObject* m, PyObject* args, PyObject* kw) {
  (void)m;
  static char* kwnames[] = {"name", "comm", "input", "output", "input_size", "output_size", "dtype", "op", "root",
                            "stream", NULL};
  const char* name;
  PyObject *pc, *pi, *po, *st = NULL;
  Py_ssize_t isz = -1, osz = -1;
  int dt = mscclppFloat32, op = mscclppSum, root = 0, k = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "sO!OO|nniiiO", kwnames, &name, &CommGroupType, &pc, &pi, &po, &isz, &osz,
                                   &dt, &op, &root, &st))
    return NULL;
  while (k < C_COUNT && strcmp(name, names[k])) k++;
  if (k == C_COUNT) return PyErr_Format(PyExc_ValueError, "collective: '%s' is not one of allreduce, allgather, "
                                        "reducescatter, alltoall, broadcast, reduce", name);
  size_t es = mscclppDataTypeSize((mscclppDataType_t)dt);
  if (es == 0) return PyErr_Format(PyExc_ValueError, "collective: dtype %d is not a DataType", dt);
  void* stream = st && st != Py_None ? PyLong_AsVoidPtr(st) : NULL;
  mscclppComm_t c = comm_of((CommGroup*)pc);
  if (PyErr_Occurred() || !c) return NULL;
  struct buf_arg in, out;
  if (buf_get(pi, 0, &in) < 0) return NULL;
  if (buf_get(po, 1, &out) < 0) return buf_release(&in), NULL;
  if (buf_sizes(&in, &out, &isz, &osz, names[k]) < 0) return buf_release(&in), buf_release(&out), NULL;
  size_t n = (size_t)((CommGroup*)pc)->nranks;
  size_t count = k == C_REDUCESCATTER ? (size_t)osz / es : k == C_ALLTOALL ? (size_t)isz / es / n : (size_t)isz / es;
  mscclppResult_t r;
  Py_BEGIN_ALLOW_THREADS;
  r = run(k, c, in.ptr, out.ptr, count, dt, op, root, stream);
  Py_END_ALLOW_THREADS;
  buf_release(&in), buf_release(&out);
  return r == mscclppSuccess ? (Py_INCREF(Py_None), Py_None) : lib_error(r, names[k]);
}
