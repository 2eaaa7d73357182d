"""What the library does not do natively: _guard turns Unsupported into NotImplementedError, or into
the same call on a torch backend when MSCCLPP_TORCH_FALLBACK asks for one."""
import os

import torch
import torch.distributed as dist

from mscclpp.torch.dtypes import Unsupported


class FallbackMixin:
    """Part of MscclppProcessGroup: self._fallback_pg, the torch backend calls are forwarded to."""

    def _guard(self, name, fn, *args):
        """fn(*args) after the queued sends and receives (p2p.py), turning Unsupported into
        NotImplementedError (or the fallback's call)."""
        if self._pending:
            self._flush_p2p()
        try:
            return fn(*args)
        except Unsupported as e:
            return self._fallback(name, str(e), args)

    def _fallback(self, name, why, args):
        """An operation the library does not do: forwarded to a torch backend made on this group's
        store when MSCCLPP_TORCH_FALLBACK is nccl or gloo (made by the first forwarded call, which every
        rank of the group makes: a collective), else NotImplementedError naming it."""
        kind = os.environ.get("MSCCLPP_TORCH_FALLBACK", "").lower()
        if kind in ("nccl", "gloo"):
            pg = self._fallback_group(kind)
            if pg is not None:
                return getattr(pg, name)(*args)
        raise NotImplementedError("mscclpp backend: %s: %s is not supported natively (set "
                                  "MSCCLPP_TORCH_FALLBACK=nccl or gloo to forward it)" % (name, why))

    def _fallback_group(self, kind):
        if self._fallback_pg is None:
            store = dist.PrefixStore("mscclpp_fallback/", self._store)
            if kind == "nccl" and dist.is_nccl_available() and torch.cuda.is_available():
                self._fallback_pg = dist.ProcessGroupNCCL(store, self._rank_, self._size_)
            elif kind == "gloo" and dist.is_gloo_available():
                self._fallback_pg = dist.ProcessGroupGloo(store, self._rank_, self._size_, self._timeout)
        return self._fallback_pg
