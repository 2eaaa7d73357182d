/* fuzz_xml.c - fuzz target for the MSCCL XML reader: any input must parse to a checked algorithm
 * (which must then convert) or fail with an error, never crash, hang or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/xml/xml.h"

static const char* const kSeeds[] = {
    "<algo name=\"a\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allreduce\" inplace=\"1\">"
    "<gpu id=\"0\" i_chunks=\"2\" o_chunks=\"0\" s_chunks=\"1\"><tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">"
    "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
    "<step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"1\"/>"
    "</tb><tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\"><step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"s\" "
    "dstoff=\"0\" cnt=\"1\" depid=\"0\" deps=\"1\" hasdep=\"0\"/></tb></gpu>"
    "<gpu id=\"1\" i_chunks=\"2\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">"
    "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>"
    "<step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/></tb></gpu></algo>",
    "<algo name=\"g\" proto=\"LL\" nchannels=\"2\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allgather\" inplace=\"0\" "
    "maxBytes=\"4096\"><gpu id=\"0\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"><copy i_off=\"0\" o_off=\"0\"/>"
    "<tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"1\"><step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
    "dstoff=\"0\" cnt=\"1\"/></tb><tb id=\"1\" send=\"-1\" recv=\"1\" chan=\"1\"><step s=\"0\" type=\"r\" srcbuf=\"i\" "
    "srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\"/></tb></gpu><gpu id=\"1\" i_chunks=\"1\" o_chunks=\"2\" "
    "s_chunks=\"0\"><copy i_off=\"0\" o_off=\"1\"/><tb id=\"0\" send=\"0\" recv=\"0\" chan=\"1\"><step s=\"0\" "
    "type=\"rcs\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/><step s=\"1\" type=\"nop\" srcbuf=\"o\" "
    "srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"0\"/></tb></gpu></algo>",
};

void fuzz_target_seeds(void (*add)(const void* data, size_t size)) {
  for (size_t i = 0; i < sizeof(kSeeds) / sizeof(kSeeds[0]); i++) add(kSeeds[i], strlen(kSeeds[i]));
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct xml_algo* a = NULL;
  if (xml_parse_buffer("fuzz.xml", (const char*)data, size, &a) != mscclppSuccess) return 0;
  char* json = NULL;
  size_t len = 0;
  if (xml_to_plan_text(a, &json, &len) != mscclppSuccess) __builtin_trap(); /* a checked algorithm converts */
  free(json);
  xml_algo_free(a);
  return 0;
}
