"""Running one operation of a group on its device. GPU ranks follow ProcessGroupNCCL's stream
semantics: an eager asynchronous call (async_op=True) runs on a side stream of the group (one per
device) that first waits for the caller's current stream; the returned Work's wait() makes the current
stream wait for the side stream; the caller's tensors are record_stream'ed on the side stream. A
synchronous call (async_op=False, the default) and any call under CUDA-graph capture go on the current
stream itself, with no side stream or event: the same order for the caller, less host time. CPU ranks
block until the call is done.

One communicator runs its calls one after another (their kernels share its scratch buffers and
flags), as NCCL does whatever streams they are issued on: a call that goes on another stream than the
group's previous eager call first makes its stream wait for that one (an event recorded there now, so
it also waits for what the caller queued there since; FSDP2's all-gather and reduce-scatter streams
are such a pair). Calls made while capturing a CUDA graph are ordered by the graph's replay stream."""
import torch

from mscclpp.torch.dtypes import Unsupported
from mscclpp.torch.library import coll
from mscclpp.torch.work import CompletedWork, CudaWork, current_stream, key_of, stream_of

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

    def _call_now(self, kind, inp, out, count, dtype, op):
        """The common eager call in as little host time as Python allows: one library collective,
        synchronous, on the current stream of this group's GPU, made when both tensors are contiguous
        CUDA tensors on that GPU, it is the current device and no send or receive is queued. True if
        made; False: nothing was done (the general path handles the call)."""
        g = self._gpu
        if g is None or self._pending or not (inp.is_cuda and inp.is_contiguous() and out.is_contiguous()):
            return False
        idx = g[0]
        if inp.get_device() != idx or out.get_device() != idx or torch._C._cuda_getDevice() != idx:
            return False
        coll(kind, g[1], inp.data_ptr(), out.data_ptr(), count, dtype, op, 0, self._current_raw(g, idx))
        return True

    def _current_raw(self, g, idx):
        """The current stream of device idx (a raw cudaStream_t) for a call of this group, ordered
        after the group's previous call (_follow) when that went on another stream."""
        key = torch._C._cuda_getCurrentStream(idx)
        if key != self._last_stream:
            self._follow(g, key)
        return torch._C._cuda_getCurrentRawStream(idx)

    def _follow(self, g, key):
        """Before a call on stream `key` (a torch stream key: id, device, type): unless the stream is
        being captured, orders it after the group's previous call when that went on another stream,
        and makes `key` the stream of the previous call."""
        if torch._C._cuda_isCurrentStreamCapturing():
            return
        last = self._last_stream
        if last is not None and last != key:
            ev = g[6]
            ev.record(stream_of(last))  # the last call and all queued on its stream since
            stream_of(key).wait_event(ev)  # the next call starts after them
        self._last_stream = key

    def _run_cuda(self, device, body, tensors, result, torch_work, host_sync, sync):
        """_run on a CUDA device, with the current device set to it for the call."""
        idx, comm, side, ready, done_ev = self._gpu_state(device)[:5]
        prev = torch._C._cuda_getDevice()
        if prev != idx:
            torch.cuda.set_device(idx)
        try:
            if (sync and not host_sync) or torch._C._cuda_isCurrentStreamCapturing():
                # The caller waits at once (or the stream is being captured): on the current stream
                # itself the call is ordered after the tensors' producers and before their later
                # users, as the side stream plus two events would make it, for less host time.
                body(comm, self._current_raw(self._gpu, idx))
                return DONE if sync else CompletedWork(result)
            cur = current_stream(idx)
            ready.record(cur)
            side.wait_event(ready)
            side_key = self._gpu[5]
            if self._last_stream not in (side_key, key_of(cur)):
                self._follow(self._gpu, side_key)  # after the previous call, on a third stream
            self._last_stream = side_key
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
