/* module.c - mscclpp._mscclpp, the CPython binding of the C library's public API; the package's
 * python/mscclpp/__init__.py builds the Python-facing names on it. Its types and functions live in
 * comm_group.c, plan.c, executor.c, gpu_buffer.c, collective.c, registry.c and native.c. Every
 * failure raises RuntimeError (ValueError for arguments) with the library's detailed message;
 * calls that may wait release the GIL. */
#include "common.h"
#include "native.h"

PyObject* lib_error(mscclppResult_t r, const char* what) {
  PyObject* type = r == mscclppInvalidArgument ? PyExc_ValueError : PyExc_RuntimeError;
  PyErr_Format(type, "%s: %s (%s)", what, mscclppGetLastError(), mscclppGetErrorString(r));
  return NULL;
}

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
    {"collective", (PyCFunction)(void (*)(void))py_collective, METH_VARARGS | METH_KEYWORDS,
     "collective(name, comm, input, output, input_size=-1, output_size=-1, dtype=7, op=0, root=0, stream=0)"},
    {"register_plan", (PyCFunction)(void (*)(void))py_register_plan, METH_VARARGS | METH_KEYWORDS,
     "register_plan(plan, priority=0, ranks_per_node=0) -> id: the registry takes the plan."},
    {"unregister_plan", py_unregister_plan, METH_O, "unregister_plan(id)"},
    {"registry_clear", py_registry_clear, METH_NOARGS, "Removes every registered plan."},
    {"registry_list", py_registry_list, METH_NOARGS, "[(id, name, collective, uses)] in selection order."},
    {"set_selector", py_set_selector, METH_O, "set_selector(fn or None): fn(request) picks the plan of a call."},
    {"_native_factory_call", py_native_factory_call, METH_VARARGS,
     "_native_factory_call(address, owner) -> capsule: calls a native algorithm's factory (native.c)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_mscclpp", "Bindings of the mscclpp C library.", -1,
                                    mod_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__mscclpp(void) {
  PyTypeObject* types[] = {&CommGroupType, &PlanType, &ExecutorType, &GpuBufferType, &NativeAlgorithmType};
  const char* names[] = {"CommGroup", "ExecutionPlan", "Executor", "RawGpuBuffer", "NativeAlgorithm"};
  enum { NTYPES = sizeof(types) / sizeof(types[0]) };
  for (int i = 0; i < NTYPES; i++)
    if (PyType_Ready(types[i]) < 0) return NULL;
  PyObject* m = PyModule_Create(&module);
  for (int i = 0; m && i < NTYPES; i++) {
    Py_INCREF(types[i]);
    if (PyModule_AddObject(m, names[i], (PyObject*)types[i]) < 0) {
      Py_DECREF(types[i]);
      Py_CLEAR(m);
    }
  }
  if (m) { extern int torch_ops_add(PyObject*); if (torch_ops_add(m) < 0) Py_CLEAR(m); } /* torch_ops.c */
  return m;
}
