/* buffers.c - buffer arguments: objects with the buffer protocol (NumPy arrays, bytearrays: host
 * memory of CPU ranks) or integers (device pointers of GPU ranks, sized by the caller). */
#include "common.h"

int buf_get(PyObject* o, int out, struct buf_arg* b) {
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

void buf_release(struct buf_arg* b) {
  if (b->view.obj) PyBuffer_Release(&b->view);
}

int buf_sizes(const struct buf_arg* in, const struct buf_arg* out, Py_ssize_t* isz, Py_ssize_t* osz, const char* what) {
  if (*isz < 0) *isz = in->len;
  if (*osz < 0) *osz = out->len;
  if (*isz < 0 || *osz < 0) {
    PyErr_Format(PyExc_ValueError, "%s: give input_size and output_size with pointer buffers", what);
    return -1;
  }
  if ((in->len >= 0 && *isz > in->len) || (out->len >= 0 && *osz > out->len)) {
    PyErr_Format(PyExc_ValueError, "%s: sizes %zd and %zd exceed the buffers' %zd and %zd bytes", what, *isz, *osz,
                 in->len, out->len);
    return -1;
  }
  return 0;
}
