/* xml.h - MSCCL XML algorithms: parsing (expat), checking, conversion to our plan JSON and MSCCL's
 * selection rule. The format is described in docs/msccl-xml.md; the mapping to our one-sided plan
 * form in plan/xml/convert.c. Nothing here depends on the executor: the output is plan JSON text. */
#ifndef MPP_PLAN_XML_XML_H_
#define MPP_PLAN_XML_XML_H_

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"

/* Limits on what a file may declare (anything larger is an error, not an allocation). */
#define XML_MAX_GPUS 1024
#define XML_MAX_TBS 1024
#define XML_MAX_STEPS 65536
#define XML_MAX_CHUNKS (1 << 24)
#define XML_MAX_CHANNELS 64

typedef enum { XML_PROTO_SIMPLE, XML_PROTO_LL, XML_PROTO_LL128 } xml_proto_t;

typedef enum {
  XML_STEP_S, XML_STEP_R, XML_STEP_RCS, XML_STEP_RRS, XML_STEP_RRC, XML_STEP_RRCS,
  XML_STEP_CPY, XML_STEP_RE, XML_STEP_NOP
} xml_step_type_t;

/* Buffers of an MSCCL algorithm: input, output, scratch. */
typedef enum { XML_BUF_I = 0, XML_BUF_O = 1, XML_BUF_S = 2 } xml_buf_t;

struct xml_step {
  int s, type, srcbuf, srcoff, dstbuf, dstoff, cnt, depid, deps, hasdep;
  int line;
};

struct xml_tb {
  int id, send, recv, chan;
  int line;
  int src_tb; /* set by xml_check: the tb of gpu `recv` that sends to this one (-1: none) */
  struct xml_step* steps;
  int nsteps, cap;
};

struct xml_copy {
  int i_off, o_off, cnt, line;
};

struct xml_gpu {
  int id, chunks[3]; /* indexed by xml_buf_t */
  int line, seen;
  struct xml_tb* tbs;
  int ntbs;
  struct xml_copy* copies;
  int ncopies;
};

struct xml_algo {
  char name[128];
  char coll[32];
  char path[512];
  int proto, nchannels, nchunksperloop, ngpus, inplace, nthreads, line;
  uint64_t min_bytes, max_bytes; /* MSCCL's rule: min <= bytes < max */
  struct xml_gpu* gpus;          /* ngpus entries, index == id */
};

/* Parses one MSCCL algorithm from memory. `path` names the source in messages. On success *out is
 * a checked algorithm (xml_check already passed); free it with xml_algo_free. On failure the last
 * error names path, line, element and attribute. */
mscclppResult_t xml_parse_buffer(const char* path, const char* data, size_t len, struct xml_algo** out);
/* As xml_parse_buffer, reading the file at path. */
mscclppResult_t xml_parse_file(const char* path, struct xml_algo** out);
void xml_algo_free(struct xml_algo* a);

/* Whole-algorithm checks after parsing: dense ids, chunk ranges against the owners' chunk counts,
 * peers, one threadblock per (peer, channel, direction), matching sends and receives, existing
 * dependencies with hasdep set, converted scratch (s_chunks + landing slots) within INT32_MAX chunks
 * per GPU, and no cycle (a deadlock) in the step graph. Sets tb->src_tb. */
mscclppResult_t xml_check(struct xml_algo* a);
/* The cycle part of xml_check: runs the steps symbolically (a step runs once its tb reached it,
 * its dependency ran and, for a receive, the matching send ran); anything left is a deadlock. */
mscclppResult_t xml_check_acyclic(const struct xml_algo* a);
/* Index of the tb of `gpu` that receives from (as_recv) or sends to `peer` on `chan`, or -1. */
int xml_find_tb(const struct xml_algo* a, int gpu, int peer, int chan, int as_recv);

/* For step `st` of tb `tb` on gpu `g`: whether it receives from tb->recv / sends to tb->send. */
int xml_step_recvs(int type);
int xml_step_sends(int type);
const char* xml_step_name(int type);

/* Converts a checked algorithm into our plan JSON object (new reference in *out). */
mscclppResult_t xml_to_plan(const struct xml_algo* a, json_t** out);
/* Converts and serializes: *json is malloc'ed text (caller frees), *len its length. */
mscclppResult_t xml_to_plan_text(const struct xml_algo* a, char** json, size_t* len);

/* MSCCL's selection rule for one call. `count` is the per-rank element count as the NCCL API takes
 * it; allgather, reducescatter and alltoall multiply it (and the bytes) by nranks. redop: "sum",
 * "prod", "max", "min" serve; anything else (avg, NULL) serves with no algorithm. */
struct xml_query {
  const char* coll;
  size_t count, elem_size;
  int nranks, inplace;
  const char* redop;
};
/* Index of the first algorithm of algos[0..n) that serves q, or -1. */
int xml_select(struct xml_algo* const* algos, int n, const struct xml_query* q);
/* Whether one algorithm serves q. */
int xml_serves(const struct xml_algo* a, const struct xml_query* q);

/* Global registry (thread-safe): algorithms loaded from files or MSCCL_XML_FILES. */
mscclppResult_t xml_registry_add_file(const char* path);
/* Loads every path of the colon-separated list; *nloaded gets how many were added. */
mscclppResult_t xml_registry_add_list(const char* list, int* nloaded);
void xml_registry_clear(void);
int xml_registry_count(void);

/* `mscclpp-plan convert FILE.xml [-o OUT.json]`: argv[0] is "convert" (or the program name, with
 * "convert" in argv[1]); the JSON goes to stdout unless -o names a file;
 * returns a process exit code (0 ok, 1 bad file, 2 usage). */
int xml_convert_main(int argc, char** argv);

#endif /* MPP_PLAN_XML_XML_H_ */
