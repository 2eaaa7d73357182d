"""Work objects of the mscclpp torch.distributed backend (subclasses of torch.distributed.Work,
whose wait() and get_future() C++ callers such as DDP's reducer reach through torch's trampoline).

CompletedWork: CPU ranks (every call is blocking) and calls captured into a CUDA graph (which ran on
the caller's stream). CudaWork: an eager call on a GPU rank, queued on the group's side stream; wait()
makes the caller's current stream wait for it (barrier: the host waits). P2PWork: a send or receive,
queued until something needs it (wait, another operation of the group), then run with every send and
receive queued with it as one group of the library, so batch_isend_irecv cannot deadlock."""
import torch
import torch.distributed as dist

_STREAMS = {}


def stream_of(key):
    """The torch Stream of a stream key (id, device index, device type), built once per key rather
    than at every call (a few microseconds each)."""
    s = _STREAMS.get(key)
    if s is None:
        if len(_STREAMS) > 256:
            _STREAMS.clear()
        s = _STREAMS[key] = torch.cuda.Stream(stream_id=key[0], device_index=key[1], device_type=key[2])
    return s


def key_of(stream):
    """A torch Stream's key, as torch._C._cuda_getCurrentStream gives it."""
    return (stream.stream_id, stream.device_index, stream.device_type)


def current_stream(index):
    """torch.cuda.current_stream(index), from the cache of stream_of."""
    return stream_of(torch._C._cuda_getCurrentStream(index))


class CompletedWork(dist.Work):
    """Work that is done when it is returned."""

    def __init__(self, result=None):
        super().__init__()
        self._result = result

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._result if self._result is not None else []

    def synchronize(self):
        pass

    def get_future(self):
        fut = torch.futures.Future()
        fut.set_result(self.result())
        return fut


class CudaWork(dist.Work):
    """A call queued on a side stream; event marks its end there."""

    def __init__(self, event, device, result=None, host_sync=False):
        super().__init__()
        self._event, self._device, self._result, self._host_sync = event, device, result, host_sync

    def wait(self, timeout=None):
        if self._host_sync:
            self._event.synchronize()
        else:
            current_stream(self._device.index).wait_event(self._event)
        return True

    def is_completed(self):
        return self._event.query()

    def is_success(self):
        return self.is_completed()

    def exception(self):
        return None

    def result(self):
        return self._result if self._result is not None else []

    def synchronize(self):
        self._event.synchronize()

    def get_future(self):
        # The future's value is ready once the current stream has waited for the side stream; a
        # CUDA-aware future records its own events on the current stream at set_result.
        self.wait()
        fut = torch.futures.Future(devices=[self._device])
        fut.set_result(self.result())
        return fut


class P2PWork(dist.Work):
    """A send or receive queued on its group until the group flushes its queue."""

    def __init__(self, pg, result):
        super().__init__()
        self._pg, self._result, self._inner = pg, result, None

    def _done(self):
        if self._inner is None:
            self._pg._flush_p2p()
            if self._inner is None:
                raise RuntimeError("mscclpp: this send/recv failed with the group it was queued with")
        return self._inner

    def wait(self, timeout=None):
        return self._done().wait(timeout)

    def is_completed(self):
        return self._done().is_completed()

    def is_success(self):
        return self._done().is_success()

    def exception(self):
        return None

    def result(self):
        return self._result

    def synchronize(self):
        self._done().synchronize()

    def get_future(self):
        self._done().wait()
        devices = sorted({t.device for t in self._result if t.is_cuda}, key=str)
        fut = torch.futures.Future(devices=devices or None)
        fut.set_result(self._result)
        return fut
