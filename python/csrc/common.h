/* common.h - what the files of mscclpp._mscclpp share: the types (each defined in its own file),
 * errors as Python exceptions, and buffer arguments (objects with the buffer protocol, or integers
 * that are device pointers). */
#ifndef MSCCLPP_PY_COMMON_H_
#define MSCCLPP_PY_COMMON_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first: it sets the feature macros the C headers read */

#include <mscclpp/collectives.h>
#include <mscclpp/comm.h>
#include <mscclpp/core.h>
#include <mscclpp/executor.h>

typedef struct {
  PyObject_HEAD mscclppComm_t comm;
  int rank, nranks;
} CommGroup;

typedef struct {
  PyObject_HEAD mscclppPlan_t plan;
  PyObject* name;  /* kept when the plan goes to the registry */
  int registered;  /* the registry owns the plan (its id) */
  int id;
} Plan;

extern PyTypeObject CommGroupType, PlanType, ExecutorType, GpuBufferType;

/* Raises for a failed library call: ValueError for argument errors, RuntimeError otherwise. */
PyObject* lib_error(mscclppResult_t r, const char* what);
/* The live communicator of a CommGroup, or NULL with an exception set. */
mscclppComm_t comm_of(CommGroup* self);
/* The plan of an ExecutionPlan not handed to the registry, or NULL with an exception set. */
mscclppPlan_t plan_of(Plan* self);

/* A buffer argument: an integer (a device pointer; its size must be given) or an object with the
 * buffer protocol (writable when out). len -1: unknown (a pointer). */
struct buf_arg {
  Py_buffer view;
  void* ptr;
  Py_ssize_t len;
};
int buf_get(PyObject* o, int out, struct buf_arg* b);
void buf_release(struct buf_arg* b);
/* Sizes of an input and an output: the given ones, or the buffers' own when -1; checked against
 * the buffers. -1 with ValueError (naming what) when a pointer has no size or a size is too big. */
int buf_sizes(const struct buf_arg* in, const struct buf_arg* out, Py_ssize_t* isz, Py_ssize_t* osz, const char* what);

/* Module functions of other files: collectives (collective.c), the plan registry (registry.c). */
PyObject* py_collective(PyObject* m, PyObject* args, PyObject* kw);
PyObject* py_register_plan(PyObject* m, PyObject* args, PyObject* kw);
PyObject* py_unregister_plan(PyObject* m, PyObject* arg);
PyObject* py_registry_clear(PyObject* m, PyObject* unused);
PyObject* py_registry_list(PyObject* m, PyObject* unused);
PyObject* py_set_selector(PyObject* m, PyObject* arg);

#endif /* MSCCLPP_PY_COMMON_H_ */
