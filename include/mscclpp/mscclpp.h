/* mscclpp.h - the whole C API. Compiles as C11 and as C++. */
#ifndef MSCCLPP_H_
#define MSCCLPP_H_

#include <mscclpp/core.h>
#include <mscclpp/comm.h>
#include <mscclpp/memory.h>
#include <mscclpp/connection.h>

#endif /* MSCCLPP_H_ */
