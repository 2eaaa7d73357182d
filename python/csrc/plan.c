/* plan.c - ExecutionPlan: a plan (the MSCCL++ executor's JSON) loaded from a file or a string and
 * validated; .name .collective .nranks .inplace .min_message_size .max_message_size, and
 * .registry_id once handed to the registry (registry.c), which then owns it. */
#include "common.h"

#include <string.h>

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
  if (self->plan && !self->registered) (void)mscclppPlanDestroy(self->plan);
  self->plan = NULL, self->registered = 0;
  Py_CLEAR(self->name);
  mscclppResult_t r = path ? mscclppPlanLoadFile(path, &self->plan)
                           : mscclppPlanLoadString(json.buf, (size_t)json.len, name ? name : "plan", &self->plan);
  if (json.buf) PyBuffer_Release(&json);
  if (r != mscclppSuccess) return lib_error(r, "ExecutionPlan"), -1;
  mscclppPlanInfo_t info;
  if (mscclppPlanInfo(self->plan, &info) != mscclppSuccess) return lib_error(r, "ExecutionPlan"), -1;
  self->name = PyUnicode_FromString(info.name);
  return self->name ? 0 : -1;
}

mscclppPlan_t plan_of(Plan* self) {
  if (!self->plan) PyErr_SetString(PyExc_RuntimeError, "ExecutionPlan: not loaded");
  return self->plan;
}

static void plan_dealloc(Plan* self) {
  if (self->plan && !self->registered) (void)mscclppPlanDestroy(self->plan);
  Py_XDECREF(self->name);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* One field of the plan's info, by name (closure). */
static PyObject* plan_get(Plan* self, void* field) {
  mscclppPlanInfo_t info;
  if (!strcmp(field, "name") && self->name) return Py_INCREF(self->name), self->name;
  if (!strcmp(field, "registry_id")) return self->registered ? PyLong_FromLong(self->id) : (Py_INCREF(Py_None), Py_None);
  if (!plan_of(self)) return NULL;
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
    {"registry_id", (getter)plan_get, NULL, "its id in the registry once registered, else None", "registry_id"},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mscclpp._mscclpp.ExecutionPlan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "An execution plan (the MSCCL++ executor's JSON), loaded and validated.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_getset = plan_getset,
};

