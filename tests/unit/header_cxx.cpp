// The public headers must compile as C++ too (this file is built by the C++ compiler).
#include <mscclpp/mscclpp.h>
#include <mscclpp/device.h>

int main() {
  mscclppConfig_t config = MSCCLPP_CONFIG_INITIALIZER;
  return (config.magic == MSCCLPP_CONFIG_MAGIC && mscclppGetErrorString(mscclppSuccess) != nullptr) ? 0 : 1;
}
