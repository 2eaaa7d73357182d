/* draw.c - a plan as text for a terminal (mscclpp-plan draw): per step (op index across every
 * block), each block's op with its chunks and peers, then a from/to matrix of the chunks that
 * cross ranks in that step (worlds of up to 16 ranks); or graphviz dot edges (--dot). */
#include <stdio.h>
#include <stdlib.h>

#include "plan/draw.h"
#include "plan/load/lower.h"

static void ref_text(const struct plan_ref* r, int me, char* buf, size_t len) {
  if (r->kind == PLAN_REF_SWITCH)
    snprintf(buf, len, "sw%d.%s[%u:%u]", r->sw, plan_buf_names[r->btype], r->index, r->index + r->size);
  else
    snprintf(buf, len, "r%d.%s[%u:%u]", r->kind == PLAN_REF_LOCAL ? me : r->rank, plan_buf_names[r->btype], r->index,
             r->index + r->size);
}

static void op_text(FILE* f, const struct plan_block* b, const struct plan_op* op, int me) {
  char t[64];
  fprintf(f, "%s", plan_op_name(op->code));
  if (op->code == PLAN_OP_PIPELINE) fprintf(f, "(x%u chunks / %llu B)", op->num_chunks, (unsigned long long)op->unit_size);
  if (op->code == PLAN_OP_BARRIER) fprintf(f, "(#%d of %d)", op->barrier_id, op->barrier_blocks);
  for (uint16_t i = 0; i < op->nsrc + op->ndst; i++) {
    ref_text(&b->refs[op->first_ref + i], me, t, sizeof(t));
    fprintf(f, "%s%s", i == 0 ? " " : i == op->nsrc ? " -> " : ",", t);
    if (i == op->nsrc - 1 && op->ndst == 0) break;
  }
  if (op->nchan && op->chan_type != PLAN_CH_NONE && op->chan_type != PLAN_CH_SWITCH) {
    fprintf(f, " @%s", op->chan_type == PLAN_CH_PORT ? "port" : "mem");
    for (uint16_t i = 0; i < op->nchan; i++) fprintf(f, "%s%d", i ? "," : ":", b->chans[op->first_chan + i].peer);
  }
  if (op->tbg_size > 1) fprintf(f, " tbg %u/%u", op->tbg_id, op->tbg_size);
}

/* Chunks moved from rank a to rank b by op (remote destinations: me -> owner; remote sources:
 * owner -> me; switch destinations: me -> every member) added to m[a * n + b]. */
static void op_moves(const struct mscclppPlan* p, const struct plan_block* b, const struct plan_op* op, int me, int* m) {
  int n = p->nranks;
  for (uint16_t i = 0; i < op->nsrc + op->ndst; i++) {
    const struct plan_ref* r = &b->refs[op->first_ref + i];
    int dst = i >= op->nsrc;
    if (r->kind == PLAN_REF_REMOTE) {
      if (dst) m[me * n + r->rank] += (int)r->size;
      else m[r->rank * n + me] += (int)r->size;
    } else if (r->kind == PLAN_REF_SWITCH && dst) {
      const struct plan_switch* sw = &p->ranks[me].sw[r->sw];
      for (int g = 0; g < sw->nranks; g++)
        if (sw->ranks[g] != me) m[me * n + sw->ranks[g]] += (int)r->size;
    }
  }
}

/* The step's matrix: row = from, column = to, cell = chunks (. = none). Small worlds only. */
static void draw_matrix(FILE* f, const struct mscclppPlan* p, uint32_t s, int* m) {
  int n = p->nranks, any = 0;
  for (int i = 0; i < n * n; i++) m[i] = 0;
  for (int r = 0; r < n; r++)
    for (int b = 0; b < p->ranks[r].nblocks; b++)
      if (s < p->ranks[r].blocks[b].nops) op_moves(p, &p->ranks[r].blocks[b], &p->ranks[r].blocks[b].ops[s], r, m);
  for (int i = 0; i < n * n; i++) any |= m[i];
  if (!any) return;
  fprintf(f, "    from\\to");
  for (int c = 0; c < n; c++) fprintf(f, " %4d", c);
  fputc('\n', f);
  for (int r = 0; r < n; r++) {
    fprintf(f, "    %7d", r);
    for (int c = 0; c < n; c++) {
      if (m[r * n + c]) fprintf(f, " %4d", m[r * n + c]);
      else fprintf(f, "    .");
    }
    fputc('\n', f);
  }
}

/* Steps: op index i of every block of every rank. */
static void draw_text(FILE* f, const struct mscclppPlan* p) {
  uint32_t steps = 0;
  for (int r = 0; r < p->nranks; r++)
    for (int b = 0; b < p->ranks[r].nblocks; b++)
      if (p->ranks[r].blocks[b].nops > steps) steps = p->ranks[r].blocks[b].nops;
  int* m = p->nranks <= 16 ? malloc(sizeof(int) * (size_t)p->nranks * (size_t)p->nranks) : NULL;
  fprintf(f, "plan %s: %s, %d ranks, %s%s, alignment %u\n", p->name, p->collective, p->nranks, p->ll ? "LL" : "Simple",
          p->inplace ? ", in place" : "", p->align);
  for (int r = 0; r < p->nranks; r++)
    fprintf(f, "  rank %d: %d blocks, chunks in %u out %u scratch %u\n", r, p->ranks[r].nblocks, p->ranks[r].in_chunks,
            p->ranks[r].out_chunks, p->ranks[r].scr_chunks);
  for (uint32_t s = 0; s < steps; s++) {
    fprintf(f, "step %u\n", s);
    for (int r = 0; r < p->nranks; r++)
      for (int b = 0; b < p->ranks[r].nblocks; b++) {
        const struct plan_block* bl = &p->ranks[r].blocks[b];
        if (s >= bl->nops) continue;
        fprintf(f, "  r%d/tb%d  ", r, b);
        op_text(f, bl, &bl->ops[s], r);
        fputc('\n', f);
      }
    if (m) draw_matrix(f, p, s, m);
  }
  free(m);
}

static void draw_dot(FILE* f, const struct mscclppPlan* p) {
  fprintf(f, "digraph \"%s\" {\n  rankdir=LR;\n", p->name);
  for (int r = 0; r < p->nranks; r++) fprintf(f, "  r%d [shape=box];\n", r);
  for (int r = 0; r < p->nranks; r++)
    for (int b = 0; b < p->ranks[r].nblocks; b++) {
      const struct plan_block* bl = &p->ranks[r].blocks[b];
      for (uint32_t i = 0; i < bl->nops; i++) {
        const struct plan_op* op = &bl->ops[i];
        for (uint16_t d = 0; d < op->ndst; d++) {
          const struct plan_ref* ref = &bl->refs[op->first_ref + op->nsrc + d];
          if (ref->kind != PLAN_REF_REMOTE) continue;
          fprintf(f, "  r%d -> r%d [label=\"tb%d#%u %s %s[%u]\"];\n", r, ref->rank, b, i, plan_op_name(op->code),
                  plan_buf_names[ref->btype], ref->index);
        }
        for (uint16_t sidx = 0; sidx < op->nsrc; sidx++) {
          const struct plan_ref* ref = &bl->refs[op->first_ref + sidx];
          if (ref->kind != PLAN_REF_REMOTE) continue;
          fprintf(f, "  r%d -> r%d [style=dashed,label=\"tb%d#%u %s %s[%u]\"];\n", ref->rank, r, b, i,
                  plan_op_name(op->code), plan_buf_names[ref->btype], ref->index);
        }
      }
    }
  fprintf(f, "}\n");
}

void plan_draw(FILE* f, const struct mscclppPlan* p, int dot) {
  if (dot) draw_dot(f, p);
  else draw_text(f, p);
}
