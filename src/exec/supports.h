/* supports.h - what the plan executor can run (mscclppExecutePlan), asked before a registered plan
 * is handed a collective call. */
#ifndef MPP_EXEC_SUPPORTS_H_
#define MPP_EXEC_SUPPORTS_H_

struct mscclppComm;

/* Nonzero when mscclppExecutePlan runs plans on this communicator: CPU ranks (peers of other hosts
 * over tcp); GPU ranks in CUDA builds when every rank is on this host. Otherwise the collectives
 * leave registered plans aside and use the built-in algorithms. */
int exec_supports_kind(const struct mscclppComm* comm);

#endif /* MPP_EXEC_SUPPORTS_H_ */
