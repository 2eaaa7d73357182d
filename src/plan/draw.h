/* draw.h - a plan as text or graphviz dot (mscclpp-plan draw). */
#ifndef MPP_PLAN_DRAW_H_
#define MPP_PLAN_DRAW_H_

#include <stdio.h>

struct mscclppPlan;
/* Writes the plan to f: a per-step listing (dot = 0) or a dot graph of remote accesses (dot = 1). */
void plan_draw(FILE* f, const struct mscclppPlan* p, int dot);

#endif /* MPP_PLAN_DRAW_H_ */
