/* Fuzz target: the plan loader and validator on arbitrary bytes (must never crash, leak or hang;
 * a rejection is fine). Seeds are small valid plans. */
#include <stdint.h>
#include <string.h>

#include <mscclpp/mscclpp.h>

static const char* const seeds[] = {
    "{\"collective\":\"sendrecv\",\"protocol\":\"Simple\",\"gpus\":[{\"id\":0,\"input_chunks\":1,"
    "\"output_chunks\":1,\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[1]}],\"remote_buffers\":"
    "[{\"rank\":1,\"type\":\"o\",\"access_channel_types\":[\"memory\"]}],\"threadblocks\":[{\"id\":0,\"channels\":"
    "[{\"channel_type\":\"memory\",\"channel_ids\":[0]}],\"remote_buffer_refs\":[{\"access_channel_type\":"
    "\"memory\",\"remote_buffer_ids\":[0]}],\"ops\":[{\"name\":\"pws\",\"channel_type\":\"memory\","
    "\"channel_ids\":[0],\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1}],\"dst_buff\":[{\"buffer_id\":0,"
    "\"index\":0,\"size\":1}]},{\"name\":\"wait\",\"channel_type\":\"memory\",\"channel_ids\":[0]}]}]},"
    "{\"id\":1,\"input_chunks\":1,\"output_chunks\":1,\"channels\":[{\"channel_type\":\"memory\","
    "\"connected_to\":[0]}],\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\","
    "\"channel_ids\":[0]}],\"ops\":[{\"name\":\"wait\",\"channel_type\":\"memory\",\"channel_ids\":[0]},"
    "{\"name\":\"signal\",\"channel_type\":\"memory\",\"channel_ids\":[0]}]}]}]}",
    "{\"collective\":\"allreduce\",\"protocol\":\"LL\",\"gpus\":[{\"id\":0,\"input_chunks\":1,\"output_chunks\":1,"
    "\"scratch_chunks\":2,\"semaphores\":[{\"init_value\":1}],\"channels\":[{\"channel_type\":\"switch\","
    "\"buffer_type\":\"s\",\"rank_groups\":[{\"size\":1,\"ranks\":[0]}]}],\"threadblocks\":[{\"id\":0,\"channels\":"
    "[{\"channel_type\":\"switch\",\"channel_ids\":[0]}],\"ops\":[{\"name\":\"sem_acquire\",\"semaphore_ids\":[0]},"
    "{\"name\":\"pipeline\",\"iter_context\":{\"unit_size\":64,\"num_chunks\":1},\"ops\":[{\"name\":\"cpkt\","
    "\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1}],\"dst_buff\":[{\"type\":\"s\",\"index\":0,\"size\":1}],"
    "\"tbg_info\":{\"tb_id\":0,\"tbg_size\":1}}]},{\"name\":\"upkt\",\"src_buff\":[{\"type\":\"s\",\"index\":0,"
    "\"size\":1}],\"dst_buff\":[{\"type\":\"o\",\"index\":0,\"size\":1}]},{\"name\":\"barrier\",\"barrier_id\":0,"
    "\"num_threadblocks\":1}]}]}]}",
};

void fuzz_target_seeds(void (*add)(const void* data, size_t size)) {
  for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) add(seeds[i], strlen(seeds[i]));
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mscclppPlan_t p = NULL;
  if (mscclppPlanLoadString((const char*)data, size, "fuzz", &p) == mscclppSuccess) {
    mscclppPlanInfo_t info;
    mscclppPlanInfo(p, &info);
    mscclppPlanDestroy(p);
  }
  return 0;
}
