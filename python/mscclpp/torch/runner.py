"""Running one operation of a group on its device. GPU ranks follow ProcessGroupNCCL's stream
semantics: an eager asynchronous call (async_op=True) runs on a side stream of the group (one per
device) that first waits for the caller's current stream; the returned Work's wait() makes the current
stream wait for the side stream; the caller's tensors are record_stream'ed on the side stream. A
synchronous call (async_op=False, the default) and any call under CUDA-graph capture go on the current
stream itself, with no side stream or event: the same order for the caller, less host time. CPU ranks
block until the call is done."""
import torch

from mscclpp.torch.dtypes import Unsupported
from mscclpp.torch.work import CompletedWork, CudaWork, current_stream

DONE = CompletedWork()  # the Work of every call made with async_op=False (the caller only waits)


class RunnerMixin:
    """Part of MscclppProcessGroup: _run, through the communicators of CommunicatorsMixin."""

    def _run(self, device, body, tensors, result, torch_work=False, host_sync=False, sync=False):
        """Runs body(comm, stream) for an operation on device: CPU ranks at once (blocking); GPU ranks
        on the side stream after the current stream, or on the current stream itself while it is
        captured or when sync. tensors: the caller's tensors the side stream uses; torch_work: body
        also runs torch operations (temporaries, copies), which then go on the side stream. sync: the
        caller waits at once (torch's async_op=False): the call goes on the current stream, which
        orders it as NCCL's side stream and events would, the tensors need no record_stream and one
        shared completed Work is returned (no Work or event made per call). host_sync: the returned
        Work's wait() blocks the host (barrier)."""
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
            if (sync and not host_sync) or torch._C._cuda_isCurrentStreamCapturing():
                # The caller waits at once (or the stream is being captured): on the current stream
                # itself the call is ordered after the tensors' producers and before their later
                # users, as the side stream plus two events would make it, for less host time.
                body(comm, torch._C._cuda_getCurrentRawStream(idx))
                return DONE if sync else CompletedWork(result)
            cur = current_stream(idx)
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
