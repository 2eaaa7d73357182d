"""Point-to-point of MscclppProcessGroup: send and recv are queued (each returns a P2PWork) until
something needs them (a wait, the group's next operation or barrier), then every queued send and
receive runs as one group of the library, so batch_isend_irecv cannot deadlock."""
from mscclpp.torch.dtypes import contig
from mscclpp.torch.library import p2p
from mscclpp.torch.work import P2PWork


class PointToPointMixin:
    """Part of MscclppProcessGroup: self._pending, the queued (is_send, tensor, peer, work)."""

    def send(self, tensors, dst, tag=0):
        return self._queue_p2p(1, tensors, dst)

    def recv(self, tensors, src, tag=0):
        return self._queue_p2p(0, tensors, src)

    def recv_anysource(self, tensors, tag=0):
        return self._fallback("recv_anysource", "receiving from any source", (tensors, tag))

    def _queue_p2p(self, send, tensors, peer):
        if not 0 <= peer < self._size_:
            raise ValueError("mscclpp: peer %d is not a rank of this group (size %d)" % (peer, self._size_))
        work = P2PWork(self, tensors)
        for t in tensors:
            self._pending.append((send, t, peer, work))
        return work

    def _flush_p2p(self):
        """Runs every queued send and receive as one group (per device), then completes their works."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        by_dev = {}
        for op in pending:
            by_dev.setdefault(op[1].device, []).append(op)
        for device, ops in by_dev.items():
            work = self._p2p_lists(device, [(s, t, p) for s, t, p, _ in ops], None)
            for _, _, _, w in ops:
                w._inner = work

    def _p2p_lists(self, device, ops, result):
        """One group of (is_send, tensor, peer) now; non-contiguous tensors go through copies."""
        def body(c, s):
            calls, back = [], []
            for send, t, peer in ops:
                x = contig(t)
                if not send and x is not t:
                    back.append((t, x))
                calls.append((send, x.data_ptr(), x.numel() * x.element_size(), peer))
            p2p(c, calls, s)
            for t, x in back:
                t.copy_(x)
        torch_work = any(not t.is_contiguous() for _, t, _ in ops)
        return self._run(device, body, [t for _, t, _ in ops], result, torch_work=torch_work)
