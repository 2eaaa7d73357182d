// nccl_header.cc - nccl.h compiles as C++ (its enums and config initializer included).
#include <nccl.h>

static_assert(sizeof(ncclConfig_t) == 72, "ncclConfig_t layout (2.27)");
static_assert(ncclNumTypes == 12 && ncclNumOps == 5 && ncclNumResults == 8, "enum values");
static_assert(NCCL_VERSION_CODE < NCCL_VERSION(2, 28, 0), "claims a version below 2.28");

ncclConfig_t nccl_header_cxx_config() { return NCCL_CONFIG_INITIALIZER; }
