/* The GPU executor's op tables (src/exec/gpu/table.c) and the kernel's size rules (dev.h), checked
 * without a GPU over the plan corpus (good.tsv, argv[1]): for every plan, rank, block and op at the
 * corpus sizes,
 * - the kernel's op length and chunk offsets (xg_op_len, xg_chunk_off) equal the host's
 *   (plan/sizes.c: plan_op_len, plan_chunk_off), two implementations of one rule;
 * - the op table's window is the op's (a pipeline: its iterations; a nested op: 0 and its
 *   length), and each reference's address is what it names, worked out here from the host's rule:
 *   the owner's input, output or scratch (made-up addresses), + chunk offset + window start, twice
 *   that for packet references, + the half for scratch in the second half's pointers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/gpu/state.h"
#include "helpers.h"
#include "plan/plan.h"

#define MAXR 8

/* Made-up buffer addresses: rank q's input, output and scratch far apart. */
static char* fake(int q, int t) { return (char*)(uintptr_t)(((uint64_t)(q * 3 + t) + 1) << 36); }

/* The per-rank input and output bytes of a call of S bytes (as mscclpp-plan run makes them). */
static void shape(const struct mscclppPlan* p, uint64_t S, uint64_t* sb, uint64_t* rb) {
  *sb = *rb = S;
  if (!strcmp(p->collective, "allgather")) *rb = S * (uint64_t)p->nranks;
  if (!strcmp(p->collective, "reducescatter")) *sb = S * (uint64_t)p->nranks;
}

/* What reference r of op (index j) names at window start s, in scratch half h. */
static uint64_t expect_addr(const struct plan_layout* l, int rank, const struct plan_op* op, const struct plan_ref* r, int j,
                            uint64_t s, int h) {
  if (r->kind == PLAN_REF_SWITCH) return 0;
  int owner = r->kind == PLAN_REF_LOCAL ? rank : r->rank;
  uint64_t off = plan_chunk_off(l, r->btype, r->index) + s, scale = xg_ref_pkt(op->code, j, op->nsrc) ? 2 : 1;
  uint64_t half = r->btype == PLAN_BUF_SCR ? (uint64_t)h * l->scr_stride : 0;
  return (uint64_t)(uintptr_t)fake(owner, r->btype) + half + scale * off;
}

/* Every op of block bl (rank `rank`) at layout l; returns the number of mismatches (printed). */
static int check_block(const struct mscclppPlan* p, int rank, int b, const struct plan_layout* l) {
  const struct plan_block* bl = &p->ranks[rank].blocks[b];
  char* io[2 * MAXR];
  char* scr[MAXR];
  for (int q = 0; q < p->nranks; q++) io[2 * q] = fake(q, 0), io[2 * q + 1] = fake(q, 1), scr[q] = fake(q, 2);
  struct xg_layout x;
  xg_layout_of(l, &x);
  int halves = p->double_scratch ? 2 : 1;
  struct xg_table_in in = {.rank = rank, .io = io, .scr = scr, .x = &x, .align = p->align < 8 ? 8 : p->align,
                           .halves = halves};
  char* tab = calloc(1, xg_tab_bytes(bl->nops, bl->nrefs, (uint32_t)halves) + 16);
  CHECK(tab != NULL);
  xg_table_fill(&in, bl, tab);
  const struct xg_win* win = (const struct xg_win*)tab;
  int bad = 0;
  uint32_t nested = 0;
  for (uint32_t i = 0; i < bl->nops; i++) {
    const struct plan_op* op = &bl->ops[i];
    const struct plan_ref* refs = &bl->refs[op->first_ref];
    uint64_t len = plan_op_len(l, bl->refs, op), s = 0, n = len;
    for (int j = 0; j < op->nsrc + op->ndst; j++)
      if (refs[j].btype != PLAN_BUF_SCR &&
          (xg_chunk_off(&x, refs[j].btype, refs[j].index) != plan_chunk_off(l, refs[j].btype, refs[j].index) ||
           xg_chunk_off(&x, refs[j].btype, refs[j].index + refs[j].size) !=
               plan_chunk_off(l, refs[j].btype, refs[j].index + refs[j].size)))
        bad++, printf("%s rank %d block %d op %u ref %d: chunk offsets differ\n", p->file, rank, b, i, j);
    if (xg_op_len(&x, refs, op->nsrc + op->ndst) != len)
      bad++, printf("%s rank %d block %d op %u: length %" PRIu64 " on the kernel's rule, %" PRIu64 " on the host's\n",
                    p->file, rank, b, i, xg_op_len(&x, refs, op->nsrc + op->ndst), len);
    if (op->code == PLAN_OP_PIPELINE)
      n = xg_pipe_iters(&x, op), nested = op->nested + 1;
    else if (nested == 0)
      xg_window(len, 0, 0, op->tbg_id, op->tbg_size, in.align, &s, &n);
    if (nested) nested--;
    if (win[i].s != s || win[i].n != n)
      bad++, printf("%s rank %d block %d op %u: table window [%" PRIu64 ", +%" PRIu64 "), expected [%" PRIu64
                    ", +%" PRIu64 ")\n", p->file, rank, b, i, win[i].s, win[i].n, s, n);
    for (int h = 0; h < halves; h++) {
      const uint64_t* ptr = (const uint64_t*)(tab + xg_tab_ptrs(bl->nops, bl->nrefs, (uint32_t)h));
      for (int j = 0; j < op->nsrc + op->ndst; j++)
        if (ptr[op->first_ref + j] != expect_addr(l, rank, op, &refs[j], j, s, h))
          bad++, printf("%s rank %d block %d op %u ref %d half %d: address %#" PRIx64 ", expected %#" PRIx64 "\n",
                        p->file, rank, b, i, j, h, ptr[op->first_ref + j], expect_addr(l, rank, op, &refs[j], j, s, h));
    }
  }
  free(tab);
  return bad;
}

/* Every rank and block of the plan at path, at each size of the comma list; returns mismatches. */
static int check_plan(const char* path, const char* sizes, int* layouts) {
  mscclppPlan_t p = NULL;
  CHECK(mscclppPlanLoadFile(path, &p) == mscclppSuccess);
  CHECK(p->nranks <= MAXR);
  int bad = 0;
  char list[256];
  snprintf(list, sizeof(list), "%s", sizes);
  for (char* tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    uint64_t sb, rb;
    shape(p, strtoull(tok, NULL, 10), &sb, &rb);
    struct plan_layout l;
    if (plan_layout_get(p, sb, rb, &l) != mscclppSuccess) continue; /* a size the plan refuses */
    (*layouts)++;
    for (int r = 0; r < p->nranks; r++)
      for (int b = 0; b < p->ranks[r].nblocks; b++) bad += check_block(p, r, b, &l);
  }
  mscclppPlanDestroy(p);
  return bad;
}

int main(int argc, char** argv) {
  CHECK(argc == 2);
  FILE* f = fopen(argv[1], "r");
  CHECK(f != NULL);
  char line[1024], path[768], sizes[128];
  int nplans = 0, layouts = 0, bad = 0, nr = 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "%767[^\t]\t%d\t%127s", path, &nr, sizes) == 3) bad += check_plan(path, sizes, &layouts), nplans++;
  fclose(f);
  printf("%d plans, %d layouts: %d mismatches\n", nplans, layouts, bad);
  CHECK(nplans > 10 && layouts > nplans);
  CHECK(bad == 0);
  return 0;
}
