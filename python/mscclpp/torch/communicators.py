"""A group's communicators, made on first use, one per rank kind: a GPU communicator for CUDA tensors
(on the tensor's device) and a CPU communicator for CPU tensors (any machine), so object collectives
and CPU tensors work on GPU machines too. Rank 0 of the group makes a unique id
(mscclpp.get_unique_id) and puts it in the group's store (torchrun's, prefixed by torch per group),
the others read it; nothing binds MASTER_PORT."""
import torch

import mscclpp
from mscclpp import _mscclpp
from mscclpp.torch.library import CPU_KIND, GPU_KIND
from mscclpp.torch.work import key_of

_UID_KEY = "mscclpp/uid/"


class CommunicatorsMixin:
    """Part of MscclppProcessGroup: self._cpu (the CPU communicator) and self._gpu (device index,
    communicator, side stream, ready event, done event, the side stream's key, ordering event), made
    on first use."""

    def _rendezvous(self, kind):
        """The unique id of this group's communicator of a rank kind, through the store: rank 0 makes
        it, every rank reads it, the last reader deletes the keys (so a later group of the same name
        on the same store cannot read a stale id)."""
        key = _UID_KEY + kind
        if self._rank_ == 0:
            self._store.set(key, mscclpp.get_unique_id())
        uid = self._store.get(key)
        if self._store.add(key + "/read", 1) == self._size_:
            for k in (key, key + "/read"):
                try:
                    self._store.delete_key(k)
                except Exception:  # a store without delete: keys stay
                    pass
        return bytes(uid)

    def _cpu_comm(self):
        if self._cpu is None:
            self._check_open()
            self._cpu = _mscclpp._torch_comm(self._rendezvous("cpu"), self._rank_, self._size_, CPU_KIND, -1,
                                             self._timeout_ms)
        return self._cpu

    def _gpu_state(self, device):
        g = self._gpu
        if g is not None and g[0] == device.index:
            return g
        if g is not None:
            raise ValueError("mscclpp: this process group runs on cuda:%d, not %s (one GPU per rank)" % (g[0], device))
        self._check_open()
        uid = self._rendezvous("cuda")
        with torch.cuda.device(device):
            comm = _mscclpp._torch_comm(uid, self._rank_, self._size_, GPU_KIND, device.index, self._timeout_ms)
            side = torch.cuda.Stream(device)
        self._gpu = (device.index, comm, side, torch.cuda.Event(), torch.cuda.Event(), key_of(side), torch.cuda.Event())
        return self._gpu

    def _check_open(self):
        if self._closed:
            raise RuntimeError("mscclpp: the process group is shut down")
