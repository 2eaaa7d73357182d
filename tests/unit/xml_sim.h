/* xml_sim.h - a tiny reference interpreter of the plan JSON that the MSCCL XML converter emits
 * (ops: put, signal, wait, copy, re, res, ppkt, upkt, repkt, respkt, sem_acquire, sem_release,
 * barrier), for tests:
 * every chunk is one double, threadblocks are interleaved at random, a blocked wait is retried,
 * and a state where nothing can run is a deadlock. Independent of the real executor. */
#ifndef MPP_TESTS_XML_SIM_H_
#define MPP_TESTS_XML_SIM_H_

#include <jansson.h>

/* Runs `plan` once. in[r][c] is rank r's input chunk c; out[r] receives the output chunks (or the
 * input chunks when the plan is in place). Returns 0, or -1 with a message in err. */
int xml_sim_run(json_t* plan, double** in, double** out, unsigned seed, char* err, size_t errlen);

#endif
