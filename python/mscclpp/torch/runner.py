"""Running one operation of a group on its device. GPU ranks follow ProcessGroupNCCL's stream
semantics: an eager call runs on a side stream of the group (one per device) that first waits for the
caller's current stream; the returned Work's wait() makes the current stream wait for the side stream;
the caller's tensors are record_stream'ed on the side stream. Under CUDA-graph capture (the current
stream capturing) the call goes on the current stream itself, with no side stream or event. CPU ranks
block until the call is done."""
import torch

from mscclpp.torch.dtypes import Unsupported
from mscclpp.torch.work import CompletedWork, CudaWork, current_stream

DONE = CompletedWork()  # the Work of every call made with async_op=False (the caller only waits)


class RunnerMixin:
    """Part of MscclppProcessGroup: _run, through the communicators of CommunicatorsMixin."""

    def _run(self, device, body, tensors, result, torch_work=False, host_sync=False, sync=False):
        """Runs body(comm, stream) for an operation on device: CPU ranks at once (blocking); GPU ranks
        on the side stream after the current stream (on the current stream while it is captured).
        tensors: the caller's tensors the side stream uses; torch_work: body also runs torch
        operations (temporaries, copies), which then go on the side stream. sync: the caller waits at
        once (torch's async_op=False): the current stream waits for the side stream here, the tensors
        need no record_stream (their later use and release are ordered after the call) and one shared
        completed Work is returned (no Work or event made per call)."""
        if device.type == "cpu":
            body(self._cpu or self._cpu_comm(), 0)
            return DONE if sync else CompletedWork(result)
        if device.type != "cuda":
            raise Unsupported("tensors on %s" % device)
        return self._run_cuda(device, body, tensors, result, torch_work, host_sync, sync)

    def _run_cuda(self, device, body, tensors, result, torch_work, host_sync, sync):
        """_run on a CUDA device, with the current device set to it for the call."""
        idx, comm, side, ready, done_ev = self._gpu_state(device)
        prev = torch._C._cuda_getDevice()
        if prev != idx:
            torch.cuda.set_device(idx)
        try:
            cur = current_stream(idx)
            if torch._C._cuda_isCurrentStreamCapturing():
                body(comm, cur.cuda_stream)  # captured: in the graph's stream order, nothing else
                return DONE if sync else CompletedWork(result)
            ready.record(cur)
            side.wait_event(ready)
            if torch_work:
                with torch.cuda.stream(side):
                    body(comm, side.cuda_stream)
            else:
                body(comm, side.cuda_stream)
            if sync and not host_sync:
                done_ev.record(side)
                cur.wait_event(done_ev)
                return DONE
            for t in tensors:
                t.record_stream(side)
            done = torch.cuda.Event()
            done.record(side)
            return CudaWork(done, device, result, host_sync)
        finally:
            if prev != idx:
                torch.cuda.set_device(prev)
