/* gpu_buffer.c - RawGpuBuffer(nbytes): memory from mscclppMemAlloc that peers can map (cuMem on the
 * current GPU; on a machine without one, shareable host memory for CPU ranks), handed to PyTorch,
 * CuPy or NumPy through DLPack: .to_dlpack(data_type="torch.float16") gives a capsule,
 * __dlpack__/__dlpack_device__ let numpy.from_dlpack and torch.from_dlpack take the object itself;
 * .data_ptr(), .bytes(), .device(). The memory lives while the object or any tensor made from it
 * does (each DLPack tensor holds a reference to the buffer). */
#include "common.h"

#include <stdint.h>
#include <string.h>

#include <mscclpp/memory.h>

/* DLPack's ABI (dlpack.h, version 0.8; the facts of the struct layouts). */
enum { DL_CPU = 1, DL_CUDA = 2 };
enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4 };
typedef struct {
  int32_t device_type, device_id;
} DLDevice;
typedef struct {
  uint8_t code, bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor*);
} DLManagedTensor;

typedef struct {
  PyObject_HEAD void* ptr;
  Py_ssize_t nbytes;
  int gpu, device; /* gpu 0: host memory (no usable GPU) */
} GpuBuffer;

static int gbuf_init(GpuBuffer* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"nbytes", NULL};
  Py_ssize_t n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "n", names, &n)) return -1;
  if (self->ptr) return PyErr_SetString(PyExc_RuntimeError, "RawGpuBuffer: already allocated"), -1;
  if (n <= 0) return PyErr_Format(PyExc_ValueError, "RawGpuBuffer: %zd bytes", n), -1;
  int dev = -1;
  (void)mscclppGetCudaDevice(&dev);
  mscclppResult_t r = dev >= 0 ? mscclppMemAlloc(&self->ptr, (size_t)n, mscclppMemCuda) : mscclppInvalidUsage;
  self->gpu = r == mscclppSuccess, self->device = self->gpu ? dev : 0;
  if (r == mscclppInvalidUsage) r = mscclppMemAlloc(&self->ptr, (size_t)n, mscclppMemHost); /* CPU ranks */
  if (r != mscclppSuccess) return lib_error(r, "RawGpuBuffer"), -1;
  self->nbytes = n;
  return 0;
}

static void gbuf_dealloc(GpuBuffer* self) {
  if (self->ptr) (void)mscclppMemFree(self->ptr);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* A DLPack element type from a name: "torch.float16", "float16", "bfloat16", "int32", ... */
static int dl_type(const char* name, DLDataType* t) {
  static const struct {
    const char* name;
    uint8_t code, bits;
  } types[] = {{"float16", DL_FLOAT, 16}, {"half", DL_FLOAT, 16},    {"float32", DL_FLOAT, 32}, {"float", DL_FLOAT, 32},
               {"float64", DL_FLOAT, 64}, {"double", DL_FLOAT, 64},  {"bfloat16", DL_BFLOAT, 16}, {"int8", DL_INT, 8},
               {"uint8", DL_UINT, 8},     {"int32", DL_INT, 32},     {"int", DL_INT, 32},       {"uint32", DL_UINT, 32},
               {"int64", DL_INT, 64},     {"long", DL_INT, 64},      {"uint64", DL_UINT, 64}};
  const char* dot = strrchr(name, '.');
  const char* base = dot ? dot + 1 : name; /* torch.float16 -> float16 */
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
    if (!strcmp(base, types[i].name)) {
      *t = (DLDataType){types[i].code, types[i].bits, 1};
      return 0;
    }
  PyErr_Format(PyExc_ValueError, "RawGpuBuffer.to_dlpack: data_type '%s' is not a DLPack type this knows", name);
  return -1;
}

/* Frees a DLPack tensor and lets go of its buffer (the consumer may call it without the GIL). */
static void dl_delete(DLManagedTensor* m) {
  PyGILState_STATE g = PyGILState_Ensure();
  Py_XDECREF((PyObject*)m->manager_ctx);
  PyGILState_Release(g);
  PyMem_RawFree(m);
}

/* The capsule destructor: a capsule nobody consumed still owns its tensor. */
static void capsule_delete(PyObject* cap) {
  if (PyCapsule_IsValid(cap, "used_dltensor")) return;
  DLManagedTensor* m = PyCapsule_GetPointer(cap, "dltensor");
  if (m) m->deleter(m);
  else PyErr_Clear();
}

/* A capsule of a one-dimensional tensor of the whole buffer as elements of type name. */
static PyObject* make_capsule(GpuBuffer* self, const char* type_name) {
  DLDataType t;
  if (!self->ptr) return PyErr_Format(PyExc_RuntimeError, "RawGpuBuffer: not allocated");
  if (dl_type(type_name, &t) < 0) return NULL;
  Py_ssize_t es = t.bits / 8;
  if (self->nbytes % es) return PyErr_Format(PyExc_ValueError, "RawGpuBuffer: %zd bytes are not whole %s elements", self->nbytes, type_name);
  DLManagedTensor* m = PyMem_RawCalloc(1, sizeof(*m) + sizeof(int64_t) * 2);
  if (!m) return PyErr_NoMemory();
  int64_t* shape = (int64_t*)(m + 1);
  shape[0] = self->nbytes / es, shape[1] = 1; /* shape, then the stride */
  m->dl_tensor = (DLTensor){self->ptr, {self->gpu ? DL_CUDA : DL_CPU, self->device}, 1, t, shape, shape + 1, 0};
  m->manager_ctx = self, m->deleter = dl_delete;
  Py_INCREF(self);
  PyObject* cap = PyCapsule_New(m, "dltensor", capsule_delete);
  if (!cap) dl_delete(m);
  return cap;
}

static PyObject* gbuf_to_dlpack(GpuBuffer* self, PyObject* args, PyObject* kw) {
  static char* names[] = {"data_type", NULL};
  const char* type = "uint8";
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|s", names, &type)) return NULL;
  return make_capsule(self, type);
}

/* The DLPack protocol (numpy.from_dlpack, torch.from_dlpack): bytes as uint8. */
static PyObject* gbuf_dlpack(GpuBuffer* self, PyObject* args, PyObject* kw) {
  (void)args, (void)kw; /* stream, max_version, dl_device, copy: nothing to synchronize or convert */
  return make_capsule(self, "uint8");
}

static PyObject* gbuf_dlpack_device(GpuBuffer* self, PyObject* unused) {
  (void)unused;
  return Py_BuildValue("(ii)", self->gpu ? DL_CUDA : DL_CPU, self->device);
}

static PyObject* gbuf_data_ptr(GpuBuffer* self, PyObject* unused) {
  (void)unused;
  return PyLong_FromVoidPtr(self->ptr);
}

static PyObject* gbuf_bytes(GpuBuffer* self, PyObject* unused) {
  (void)unused;
  return PyLong_FromSsize_t(self->nbytes);
}

static PyObject* gbuf_device(GpuBuffer* self, PyObject* unused) {
  (void)unused;
  return self->gpu ? PyLong_FromLong(self->device) : PyLong_FromLong(-1);
}

static PyMethodDef gbuf_methods[] = {
    {"to_dlpack", (PyCFunction)(void (*)(void))gbuf_to_dlpack, METH_VARARGS | METH_KEYWORDS,
     "to_dlpack(data_type='uint8'): a DLPack capsule of the whole buffer (torch.utils.dlpack.from_dlpack takes it)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))gbuf_dlpack, METH_VARARGS | METH_KEYWORDS, NULL},
    {"__dlpack_device__", (PyCFunction)gbuf_dlpack_device, METH_NOARGS, NULL},
    {"data_ptr", (PyCFunction)gbuf_data_ptr, METH_NOARGS, "The buffer's address."},
    {"bytes", (PyCFunction)gbuf_bytes, METH_NOARGS, "Its size in bytes."},
    {"device", (PyCFunction)gbuf_device, METH_NOARGS, "Its CUDA device, or -1 for host memory (CPU ranks)."},
    {NULL, NULL, 0, NULL}};

PyTypeObject GpuBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mscclpp._mscclpp.RawGpuBuffer",
    .tp_basicsize = sizeof(GpuBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Memory peers can map (GPU, or host memory for CPU ranks), shared through DLPack.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)gbuf_init,
    .tp_dealloc = (destructor)gbuf_dealloc,
    .tp_methods = gbuf_methods,
};
