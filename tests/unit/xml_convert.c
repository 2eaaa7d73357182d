/* xml_convert.c - MSCCL XML samples (tests/xml) -> plan JSON: structure (every buffer reference in
 * range, puts matched by signals and waits, packets by unpacks, semaphores balanced, expected op
 * counts) and results, by running each plan in the reference interpreter xml_sim with random
 * interleavings: allreduce sums, allgather gathers. */
#include <string.h>

#include "helpers.h"
#include "plan/xml/xml.h"
#include "xml_sim.h"

#define DIR MPP_SOURCE_DIR "/tests/xml/"

static json_t* convert(const char* file, struct xml_algo** algo) {
  struct xml_algo* a;
  json_t* p;
  CHECK_OK(xml_parse_file(file, &a));
  CHECK_OK(xml_to_plan(a, &p));
  *algo = a;
  return p;
}

static int count_ops(json_t* gpu, const char* name) {
  int n = 0;
  size_t ti, oi;
  json_t *tb, *op;
  json_array_foreach(json_object_get(gpu, "threadblocks"), ti, tb) json_array_foreach(json_object_get(tb, "ops"), oi, op)
      n += strcmp(json_string_value(json_object_get(op, "name")), name) == 0;
  return n;
}

/* Local buffer refs within the GPU's chunk counts; remote refs within the owner's scratch. */
static void check_refs(json_t* plan, json_t* gpu, json_t* tb, json_t* refs, int inplace) {
  size_t i;
  json_t* r;
  json_array_foreach(refs, i, r) {
    int idx = (int)json_integer_value(json_object_get(r, "index"));
    int size = (int)json_integer_value(json_object_get(r, "size"));
    json_t* t = json_object_get(r, "type");
    int limit;
    if (t) {
      const char* k = json_string_value(t);
      const char* key = k[0] == 'i' ? "input_chunks" : k[0] == 'o' ? "output_chunks" : "scratch_chunks";
      limit = (int)json_integer_value(json_object_get(gpu, key));
      if (inplace && k[0] == 'o' && limit == 0) limit = (int)json_integer_value(json_object_get(gpu, "input_chunks"));
    } else {
      int bid = (int)json_integer_value(json_object_get(r, "buffer_id"));
      json_t* ids = json_object_get(json_array_get(json_object_get(tb, "remote_buffer_refs"), 0), "remote_buffer_ids");
      CHECK(bid >= 0 && (size_t)bid < json_array_size(ids));
      json_t* rb = json_array_get(json_object_get(gpu, "remote_buffers"), (size_t)json_integer_value(json_array_get(ids, (size_t)bid)));
      CHECK(rb && strcmp(json_string_value(json_object_get(rb, "type")), "s") == 0);
      json_t* owner = json_array_get(json_object_get(plan, "gpus"), (size_t)json_integer_value(json_object_get(rb, "rank")));
      limit = (int)json_integer_value(json_object_get(owner, "scratch_chunks"));
    }
    CHECK_MSG(idx >= 0 && size > 0 && idx + size <= limit, "ref [%d,+%d) beyond %d chunks", idx, size, limit);
  }
}

static void check_structure(json_t* plan, const struct xml_algo* a) {
  int inplace = json_is_true(json_object_get(plan, "inplace"));
  CHECK((int)json_array_size(json_object_get(plan, "gpus")) == a->ngpus);
  int puts = 0, signals = 0, waits = 0, ppkt = 0, upkt = 0;
  size_t g, ti, oi;
  json_t *gpu, *tb, *op;
  json_array_foreach(json_object_get(plan, "gpus"), g, gpu) {
    CHECK(json_integer_value(json_object_get(gpu, "id")) == (json_int_t)g);
    int nch = (int)json_array_size(json_object_get(json_array_get(json_object_get(gpu, "channels"), 0), "connected_to"));
    int nsem = (int)json_array_size(json_object_get(gpu, "semaphores")), rel = 0, acq = 0;
    json_array_foreach(json_object_get(gpu, "threadblocks"), ti, tb) {
      json_t* ids = json_object_get(json_array_get(json_object_get(tb, "channels"), 0), "channel_ids");
      for (size_t k = 0; k < json_array_size(ids); k++) CHECK(json_integer_value(json_array_get(ids, k)) < nch);
      json_array_foreach(json_object_get(tb, "ops"), oi, op) {
        check_refs(plan, gpu, tb, json_object_get(op, "src_buff"), inplace);
        check_refs(plan, gpu, tb, json_object_get(op, "dst_buff"), inplace);
        json_t* cids = json_object_get(op, "channel_ids");
        for (size_t k = 0; k < json_array_size(cids); k++)
          CHECK((size_t)json_integer_value(json_array_get(cids, k)) < json_array_size(ids));
        json_t* sids = json_object_get(op, "semaphore_ids");
        for (size_t k = 0; k < json_array_size(sids); k++) CHECK(json_integer_value(json_array_get(sids, k)) < nsem);
        const char* n = json_string_value(json_object_get(op, "name"));
        if (!strcmp(n, "sem_release")) rel += (int)json_array_size(sids);
        if (!strcmp(n, "sem_acquire")) acq += (int)json_array_size(sids);
      }
    }
    CHECK_MSG(rel == nsem && acq == nsem, "gpu %zu: %d semaphores, %d releases, %d acquires", g, nsem, rel, acq);
    puts += count_ops(gpu, "put") + count_ops(gpu, "res"), signals += count_ops(gpu, "signal");
    waits += count_ops(gpu, "wait");
    ppkt += count_ops(gpu, "ppkt") + count_ops(gpu, "respkt"), upkt += count_ops(gpu, "upkt") + count_ops(gpu, "repkt");
    upkt += count_ops(gpu, "respkt"); /* it also consumes packets */
  }
  CHECK_MSG(puts == signals && signals == waits, "puts %d signals %d waits %d", puts, signals, waits);
  CHECK_MSG(ppkt == upkt, "packets sent %d, received %d", ppkt, upkt);
}

/* Runs the plan in xml_sim under several interleavings and checks the collective's result. */
static void check_results(json_t* plan, const struct xml_algo* a) {
  int n = a->ngpus, allgather = strcmp(a->coll, "allgather") == 0;
  int ni = a->gpus[0].chunks[XML_BUF_I], no = allgather ? a->gpus[0].chunks[XML_BUF_O] : ni;
  double *in[16], *out[16];
  for (int r = 0; r < n; r++) {
    in[r] = calloc((size_t)ni, sizeof(double)), out[r] = calloc((size_t)no, sizeof(double));
    for (int c = 0; c < ni; c++) in[r][c] = (r + 1) * 1000.0 + c;
  }
  char err[256];
  for (unsigned seed = 1; seed <= 20; seed++) {
    CHECK_MSG(xml_sim_run(plan, in, out, seed, err, sizeof(err)) == 0, "%s seed %u: %s", a->name, seed, err);
    for (int r = 0; r < n; r++)
      for (int c = 0; c < no; c++) {
        double want = allgather ? in[c / ni][c % ni] : 0; /* allgather: rank c / ni's chunk c % ni */
        for (int q = 0; !allgather && q < n; q++) want += in[q][c];
        CHECK_MSG(out[r][c] == want, "%s seed %u: rank %d chunk %d = %g, want %g", a->name, seed, r, c, out[r][c], want);
      }
  }
  for (int r = 0; r < n; r++) free(in[r]), free(out[r]);
}

static void sample(const char* file, const char* protocol, const char* op, int per_gpu) {
  struct xml_algo* a;
  json_t* p = convert(file, &a);
  CHECK(strcmp(json_string_value(json_object_get(p, "protocol")), protocol) == 0);
  check_structure(p, a);
  for (int g = 0; g < a->ngpus; g++) {
    int got = count_ops(json_array_get(json_object_get(p, "gpus"), (size_t)g), op);
    CHECK_MSG(got == per_gpu, "%s gpu %d: %d %s ops, want %d", file, g, got, op, per_gpu);
  }
  check_results(p, a);
  char* text;
  size_t len;
  CHECK_OK(xml_to_plan_text(a, &text, &len));
  CHECK(len == strlen(text) && text[0] == '{');
  free(text);
  json_decref(p);
  xml_algo_free(a);
}

static void alignment(const char* file, int want) {
  struct xml_algo* a;
  json_t* p = convert(file, &a);
  int got = (int)json_integer_value(json_object_get(p, "buffer_alignment"));
  CHECK_MSG(got == want, "%s: buffer_alignment %d, want %d", file, got, want);
  json_decref(p);
  xml_algo_free(a);
}

int main(void) {
  sample(DIR "ring_allreduce.xml", "Simple", "signal", 12);       /* 2 tbs x 6 sends */
  sample(DIR "ring_allreduce.xml", "Simple", "put", 8);           /* 2 x (s, rrcs, rcs, rcs) */
  sample(DIR "ring_allreduce.xml", "Simple", "res", 4);           /* 2 x (rrs, rrs) */
  sample(DIR "allpairs_allreduce_ll.xml", "LL", "ppkt", 6);       /* 3 tbs x 2 sends */
  sample(DIR "allpairs_allreduce_ll.xml", "LL", "repkt", 3);      /* 3 tbs x rrc */
  sample(DIR "allpairs_allreduce_ll.xml", "LL", "sem_acquire", 4); /* 4 cross-tb deps */
  sample(DIR "ring_allreduce_ll.xml", "LL", "respkt", 4);        /* LL128 -> LL; 2 x (rrs, rrs) */
  sample(DIR "ring_allgather.xml", "Simple", "copy", 4);          /* <copy>, rcs, rcs, r */
  /* MSCCL scratch: r into s, re s -> s and s -> o, cpy i -> o (Simple: 3 tbs x 2 r, 1 cpy) */
  sample(DIR "allpairs_allreduce_cpy_re.xml", "Simple", "re", 3);
  sample(DIR "allpairs_allreduce_cpy_re.xml", "Simple", "copy", 7);
  sample(DIR "allpairs_allreduce_cpy_re_ll.xml", "LL", "re", 3);
  sample(DIR "allpairs_allreduce_cpy_re_ll.xml", "LL", "upkt", 6);
  sample(DIR "ring_allgather_cpy.xml", "Simple", "copy", 5);       /* cpy i -> o, 2 x (r, cpy s -> o) */
  sample(DIR "ring_allgather_cpy.xml", "Simple", "put", 2);        /* s from i, s from s */
  sample(DIR "copy_allgather_n1.xml", "Simple", "copy", 1);        /* <copy> and no <tb>: a tb of its own */
  /* buffer_alignment: 16, or with MSCCL scratch the least the protocol takes (equal chunks) */
  alignment(DIR "ring_allreduce.xml", 16);
  alignment(DIR "allpairs_allreduce_ll.xml", 16);
  alignment(DIR "allpairs_allreduce_cpy_re.xml", 1);
  alignment(DIR "allpairs_allreduce_cpy_re_ll.xml", 8);
  alignment(DIR "ring_allgather_cpy.xml", 1);
  printf("xml_convert: ok\n");
  return 0;
}
