/* supports.h - what the plan executor can run (mscclppExecutePlan), asked before a registered plan
 * is handed a collective call. */
#ifndef MPP_EXEC_SUPPORTS_H_
#define MPP_EXEC_SUPPORTS_H_

struct mscclppComm;

/* Nonzero when mscclppExecutePlan runs plans on this rank's kind (CPU ranks; GPU ranks in CUDA
 * builds). */
int exec_supports_kind(const struct mscclppComm* comm);

#endif /* MPP_EXEC_SUPPORTS_H_ */
