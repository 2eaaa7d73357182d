/* mscclpp.h - the whole C API. Compiles as C11 and as C++. */
#ifndef MSCCLPP_H_
#define MSCCLPP_H_

#include <mscclpp/core.h>
#include <mscclpp/comm.h>
#include <mscclpp/memory.h>
#include <mscclpp/connection.h>
#include <mscclpp/wait.h>
#include <mscclpp/memory_channel.h>
#include <mscclpp/port_channel.h>
#include <mscclpp/switch_channel.h>
#include <mscclpp/devconn.h>
#include <mscclpp/collectives.h>
#include <mscclpp/executor.h>
#include <mscclpp/msccl_xml.h>
#include <mscclpp/native_algorithm.h>

#endif /* MSCCLPP_H_ */
