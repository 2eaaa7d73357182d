"""MscclppProcessGroup: torch.distributed's process group for backend "mscclpp", a Python subclass of
torch.distributed.ProcessGroup (torch does not let Python subclass its C++ Backend) that runs every
operation through the C library's collectives (mscclpp._mscclpp._torch_* in python/csrc/torch_ops.c).

The class wires together one mixin per concern: communicators.py (rendezvous and communicators),
runner.py (streams and Work of one operation), fallback.py (what the library does not do),
reduce_collectives.py and data_collectives.py (the collectives), p2p.py (queued sends and receives)
and groups.py (splits); dtypes.py and library.py hold the dtype/op mapping and the library's entry
points. create_backend is what torch.distributed calls to make a group."""
import torch
import torch.distributed as dist

from mscclpp.torch.communicators import CommunicatorsMixin
from mscclpp.torch.data_collectives import DataCollectivesMixin
from mscclpp.torch.dtypes import DTYPES
from mscclpp.torch.fallback import FallbackMixin
from mscclpp.torch.groups import SplitMixin, split_group
from mscclpp.torch.library import AR, coll
from mscclpp.torch.p2p import PointToPointMixin
from mscclpp.torch.reduce_collectives import ReduceCollectivesMixin
from mscclpp.torch.runner import RunnerMixin
from mscclpp.torch.work import CompletedWork

__all__ = ["MscclppProcessGroup", "create_backend", "split_group"]


class MscclppProcessGroup(ReduceCollectivesMixin, DataCollectivesMixin, PointToPointMixin, SplitMixin,
                          FallbackMixin, RunnerMixin, CommunicatorsMixin, dist.ProcessGroup):
    """A process group whose operations run on mscclpp communicators (see the module's text)."""

    def __init__(self, store, rank, size, timeout=None, ranks=None):
        super().__init__(rank, size)
        self._store, self._rank_, self._size_ = store, rank, size
        ms = int(timeout.total_seconds() * 1000) if timeout is not None else 0
        self._timeout_ms = max(0, min(ms, 0x7FFFFFFF))
        self._timeout = timeout
        self._cpu = None  # CommGroup of CPU ranks
        self._gpu = None  # see CommunicatorsMixin
        self._last_stream = None  # key of the stream of the group's previous GPU call (runner.py)
        self._pending = []  # queued sends/receives: (is_send, tensor, peer, work)
        self._splits = 0
        self._fallback_pg = None
        self._group_name = ""
        self._group_desc = ""
        self._ranks = ranks
        self._closed = False

    # ---- what torch asks of a process group -------------------------------------------------
    def getBackendName(self):
        return "mscclpp"

    def setGroupName(self, name):
        self._group_name = name

    def getGroupName(self):
        return self._group_name

    def setGroupDesc(self, desc):
        self._group_desc = desc

    def getGroupDesc(self):
        return self._group_desc

    @property
    def group_name(self):
        return self._group_name

    @property
    def group_desc(self):
        return self._group_desc

    def get_group_store(self):
        return self._store

    def __repr__(self):
        return "MscclppProcessGroup(rank=%d, size=%d, name=%r)" % (self._rank_, self._size_, self._group_name)

    # torch treats a Python ProcessGroup as its own backend for every device, but still asks for the
    # backend of the group's bound device (init_process_group(device_id=...), inherited by new_group)
    # and whether it splits eagerly; the C++ lookup knows no backend of ours, so answer here.
    supports_splitting = False

    def _get_backend(self, device):
        return self

    # ---- barrier, teardown ------------------------------------------------------------------
    def barrier(self, opts=None):
        if self._pending:
            self._flush_p2p()
        device = getattr(opts, "device", None) if opts is not None else None
        if device is not None and device.type == "cuda":
            if device.index is None:
                device = torch.device("cuda", torch.cuda.current_device())
            t = torch.zeros(1, device=device)
            w = self._run(device, lambda c, s: coll(AR, c, t.data_ptr(), t.data_ptr(), 1, DTYPES[torch.float32],
                                                    0, 0, s), (t,), [t], host_sync=True)
            w.wait()
            return w
        self._cpu_comm().barrier()
        return CompletedWork([])

    def shutdown(self):
        if self._pending:
            try:
                self._flush_p2p()
            except Exception:
                pass
        if self._gpu is not None:
            try:
                torch.cuda.synchronize(self._gpu[0])
            except Exception:
                pass
        for c in (self._cpu, self._gpu[1] if self._gpu else None):
            if c is not None:
                c.close()
        self._cpu = self._gpu = None
        self._closed = True

    def abort(self):
        self.shutdown()


def create_backend(store, rank, size, timeout):
    """The creator registered with torch.distributed.Backend.register_backend: torch calls it with the
    group's prefixed store, the rank in the group, the group's size and its timeout."""
    return MscclppProcessGroup(store, rank, size, timeout)
