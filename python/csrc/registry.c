/* registry.c - the C library's plan registry from Python: plans registered here serve the
 * library's collectives (collective.c, and C callers in the process); a selector written in Python
 * picks among the candidates of each call. */
#include "common.h"

PyObject* py_register_plan(PyObject* m, PyObject* args, PyObject* kw) {
  (void)m;
  static char* kwnames[] = {"plan", "priority", "ranks_per_node", NULL};
  PyObject* po;
  mscclppPlanRegOptions_t opt = MSCCLPP_PLAN_REG_OPTIONS_INITIALIZER;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|ii", kwnames, &PlanType, &po, &opt.priority, &opt.ranksPerNode))
    return NULL;
  Plan* p = (Plan*)po;
  if (p->registered) return PyErr_Format(PyExc_ValueError, "register_plan: the plan is registered already (id %d)", p->id);
  if (!plan_of(p)) return NULL;
  int id = 0;
  mscclppResult_t r = mscclppPlanRegister(p->plan, &opt, &id);
  if (r != mscclppSuccess) return lib_error(r, "register_plan");
  p->registered = 1, p->id = id; /* the registry owns the plan now */
  return PyLong_FromLong(id);
}

PyObject* py_unregister_plan(PyObject* m, PyObject* arg) {
  (void)m;
  long id = PyLong_AsLong(arg);
  if (PyErr_Occurred()) return NULL;
  mscclppResult_t r = mscclppPlanUnregister((int)id);
  return r == mscclppSuccess ? (Py_INCREF(Py_None), Py_None) : lib_error(r, "unregister_plan");
}

PyObject* py_registry_clear(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  mscclppResult_t r = mscclppPlanRegistryClear();
  return r == mscclppSuccess ? (Py_INCREF(Py_None), Py_None) : lib_error(r, "registry_clear");
}

PyObject* py_registry_list(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  int ids[256], n = 0;
  mscclppResult_t r = mscclppPlanRegistryList(ids, 256, &n);
  if (r != mscclppSuccess) return lib_error(r, "registry_list");
  PyObject* out = PyList_New(0);
  for (int i = 0; out && i < n && i < 256; i++) {
    mscclppPlanEntryInfo_t e;
    if ((r = mscclppPlanRegistryQuery(ids[i], &e)) != mscclppSuccess) {
      Py_DECREF(out);
      return lib_error(r, "registry_list");
    }
    PyObject* t = Py_BuildValue("(issK)", e.id, e.name, e.collective, (unsigned long long)e.uses);
    if (!t || PyList_Append(out, t) < 0) Py_CLEAR(out);
    Py_XDECREF(t);
  }
  return out;
}

/* ---- the selector ------------------------------------------------------------------------------ */

static PyObject* selector; /* the Python callable, or NULL */

/* What the Python selector gets: a dict of the call, with the candidates' names in priority order. */
static PyObject* request(const mscclppPlanQuery_t* q, const mscclppPlanCandidate_t* c, int n) {
  PyObject* names = PyList_New(n);
  for (int i = 0; names && i < n; i++) {
    mscclppPlanInfo_t info;
    const char* nm = mscclppPlanInfo(c[i].plan, &info) == mscclppSuccess ? info.name : "?";
    PyObject* s = PyUnicode_FromString(nm);
    if (!s) Py_CLEAR(names);
    else PyList_SET_ITEM(names, i, s);
  }
  if (!names) return NULL;
  return Py_BuildValue("{s:s,s:n,s:n,s:i,s:i,s:i,s:i,s:i,s:O,s:i,s:N}", "collective", q->collective, "message_size",
                       (Py_ssize_t)q->bytes, "count", (Py_ssize_t)q->count, "dtype", (int)q->datatype, "op", q->op,
                       "world_size", q->worldSize, "ranks_per_node", q->ranksPerNode, "rank", q->rank, "in_place",
                       q->inplace ? Py_True : Py_False, "root", q->root, "candidates", names);
}

/* The Python selector's answer as a candidate index: None -> the built-in algorithms; a name (or a
 * registered ExecutionPlan) -> that candidate; -1 with an exception when it names none. */
static int answer(PyObject* a, PyObject* req) {
  if (a == Py_None) return MSCCLPP_PLAN_SELECT_BUILTIN;
  PyObject* name = PyObject_TypeCheck(a, &PlanType) ? ((Plan*)a)->name : a;
  PyObject* names = PyDict_GetItemString(req, "candidates");
  for (Py_ssize_t i = 0; name && names && i < PyList_GET_SIZE(names); i++) {
    int eq = PyObject_RichCompareBool(PyList_GET_ITEM(names, i), name, Py_EQ);
    if (eq < 0) return -3;
    if (eq) return (int)i;
  }
  PyErr_Format(PyExc_ValueError, "the plan selector returned %R, which is not among the candidates %R", a, names);
  return -3;
}

/* The C selector: runs the Python one with the GIL. A Python error is printed and fails the call
 * (InvalidUsage, as the registry treats an answer it cannot use). */
static int trampoline(const mscclppPlanQuery_t* q, const mscclppPlanCandidate_t* c, int n, void* ud) {
  (void)ud;
  PyGILState_STATE g = PyGILState_Ensure();
  int pick = -3;
  PyObject* req = selector ? request(q, c, n) : NULL;
  PyObject* a = req ? PyObject_CallOneArg(selector, req) : NULL;
  if (a) pick = answer(a, req);
  if (PyErr_Occurred()) PyErr_Print();
  Py_XDECREF(a), Py_XDECREF(req);
  PyGILState_Release(g);
  return pick;
}

PyObject* py_set_selector(PyObject* m, PyObject* fn) {
  (void)m;
  if (fn != Py_None && !PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "set_selector: %R is not callable", fn);
  mscclppResult_t r = fn == Py_None ? mscclppPlanSelectorSet(NULL, NULL) : mscclppPlanSelectorSet(trampoline, NULL);
  if (r != mscclppSuccess) return lib_error(r, "set_selector");
  Py_XINCREF(fn == Py_None ? NULL : fn);
  Py_XSETREF(selector, fn == Py_None ? NULL : fn);
  Py_RETURN_NONE;
}
