/* native.h - mscclpp._mscclpp's side of native algorithms (native.c): the type NativeAlgorithm
 * (a library handle made from a factory's capsule) and the call of a factory by address. */
#ifndef MSCCLPP_PY_NATIVE_H_
#define MSCCLPP_PY_NATIVE_H_

#include "common.h"

/* The name of the capsules that hold a factory's const mscclppNativeAlgorithmDef*. */
#define NATIVE_CAPSULE_NAME "mscclpp.native_algorithm"

extern PyTypeObject NativeAlgorithmType;

/* _native_factory_call(address, owner) -> capsule: calls the factory at address (a function
 * `const mscclppNativeAlgorithmDef* f(void)` of a loaded library) and wraps its result; the capsule
 * keeps owner (the library's module object) alive. */
PyObject* py_native_factory_call(PyObject* m, PyObject* args);

#endif /* MSCCLPP_PY_NATIVE_H_ */
