"""What a call of Executor.execute from Python costs over the same call made from C.

    python3 python/bench/execute_overhead.py [ITERS]

One rank (a one-rank communicator from a unique id), a one-block plan that copies its input to its
output, 64-byte NumPy buffers: the call itself is as cheap as the library makes it, so the
difference between the two loops is the binding's cost. Prints both means and the difference (us
per call), best of five rounds each."""
import json
import sys
import time

import numpy as np

import mscclpp

PLAN = {"name": "copy1", "collective": "allreduce", "protocol": "Simple", "inplace": False,
        "num_threads_per_block": 1024,
        "gpus": [{"id": 0, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0, "channels": [],
                  "remote_buffers": [], "semaphores": [],
                  "threadblocks": [{"id": 0, "channels": [], "remote_buffer_refs": [],
                                    "ops": [{"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                                             "dst_buff": [{"type": "o", "index": 0, "size": 1}]}]}]}]}


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    with mscclpp.CommGroup(unique_id=mscclpp.get_unique_id(), rank=0, size=1) as comm:
        ex = mscclpp.Executor(comm)
        plan = mscclpp.ExecutionPlan(json=json.dumps(PLAN))
        x, y = np.arange(16, dtype=np.float32), np.zeros(16, dtype=np.float32)
        ex.execute(plan, x, y)
        assert np.array_equal(x, y)
        c_best = py_best = float("inf")
        for _ in range(5):
            c_best = min(c_best, ex._execute_loop(plan, x, y, iters))
            t0 = time.perf_counter()
            for _ in range(iters):
                ex.execute(plan, x, y)
            py_best = min(py_best, (time.perf_counter() - t0) / iters)
    print("execute from C: %.3f us per call; from Python: %.3f us; the binding adds %.3f us (%d calls, best of 5)"
          % (c_best * 1e6, py_best * 1e6, (py_best - c_best) * 1e6, iters))


if __name__ == "__main__":
    main()
