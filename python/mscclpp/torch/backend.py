"""MscclppProcessGroup: torch.distributed's process group for backend "mscclpp", a Python subclass of
torch.distributed.ProcessGroup (torch does not let Python subclass its C++ Backend) that runs every
operation through the C library's collectives (mscclpp._mscclpp._torch_* in python/csrc/torch_ops.c).

Communicators are made on first use, one per rank kind: a GPU communicator for CUDA tensors (on the
tensor's device) and a CPU communicator for CPU tensors (any machine), so object collectives and CPU
tensors work on GPU machines too. Rank 0 of the group makes a unique id (mscclpp.get_unique_id) and
puts it in the group's store (torchrun's, prefixed by torch per group), the others read it; nothing
binds MASTER_PORT.

GPU ranks follow ProcessGroupNCCL's stream semantics: an eager call runs on a side stream of the group
(one per device) that first waits for the caller's current stream; the returned Work's wait() makes
the current stream wait for the side stream; the caller's tensors are record_stream'ed on the side
stream. Under CUDA-graph capture (the current stream capturing) the call goes on the current stream
itself, with no side stream or event. CPU ranks block until the call is done."""
import os

import torch
import torch.distributed as dist

import mscclpp
from mscclpp import _mscclpp
from mscclpp.torch.work import CompletedWork, CudaWork, P2PWork, current_stream
from mscclpp.utils import torch_dtype_to_mscclpp_dtype

_coll, _premul, _p2p = _mscclpp._torch_coll, _mscclpp._torch_premul, _mscclpp._torch_p2p
AR, AG, RS, A2A, BC, RED = 0, 1, 2, 3, 4, 5
_U8 = int(mscclpp.DataType.uint8)
_CPU_KIND, _GPU_KIND = 1, 2
_RT = dist.ReduceOp.RedOpType
_OPS = {_RT.SUM: 0, _RT.PRODUCT: 1, _RT.MAX: 2, _RT.MIN: 3, _RT.AVG: 4}
_BOOL_OPS = {_RT.SUM: 2, _RT.PRODUCT: 3, _RT.MAX: 2, _RT.MIN: 3}  # or / and, as ProcessGroupNCCL
_BITWISE = {_RT.BAND: torch.bitwise_and, _RT.BOR: torch.bitwise_or, _RT.BXOR: torch.bitwise_xor}
_PREMUL = "premul"
_DONE = CompletedWork()  # the Work of every call made with async_op=False (the caller only waits)


def _dtype_table():
    table = {}
    for name in ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
                 "float8_e4m3fn", "float8_e5m2"):
        dt = getattr(torch, name, None)
        if dt is not None:
            try:
                table[dt] = int(torch_dtype_to_mscclpp_dtype(dt))
            except ValueError:
                pass
    return table


_DTYPES = _dtype_table()
_UID_KEY = "mscclpp/uid/"


class _Unsupported(Exception):
    """An operation this backend does not do natively (raised as NotImplementedError or forwarded)."""


def _contig(t):
    return t if t.is_contiguous() else t.contiguous()


def _red_view(t, kind):
    """(tensor to reduce, mscclpp dtype) for a reduction of t; complex sums as their real pairs."""
    dt = _DTYPES.get(t.dtype)
    if dt is not None:
        return t, dt
    if t.dtype.is_complex and kind in (_RT.SUM, _RT.AVG, _RT.PREMUL_SUM):
        r = torch.view_as_real(t)
        return r, _DTYPES[r.dtype]
    if t.dtype is torch.bool:
        return t.view(torch.uint8), _U8
    raise _Unsupported("reductions of %s tensors" % t.dtype)


class MscclppProcessGroup(dist.ProcessGroup):
    """A process group whose operations run on mscclpp communicators (see the module's text)."""

    def __init__(self, store, rank, size, timeout=None, ranks=None):
        super().__init__(rank, size)
        self._store, self._rank_, self._size_ = store, rank, size
        ms = int(timeout.total_seconds() * 1000) if timeout is not None else 0
        self._timeout_ms = max(0, min(ms, 0x7FFFFFFF))
        self._timeout = timeout
        self._cpu = None  # CommGroup of CPU ranks
        self._gpu = None  # (device index, CommGroup, side stream, ready event)
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

    # ---- communicators ----------------------------------------------------------------------
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
            self._cpu = _mscclpp._torch_comm(self._rendezvous("cpu"), self._rank_, self._size_, _CPU_KIND, -1,
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
            comm = _mscclpp._torch_comm(uid, self._rank_, self._size_, _GPU_KIND, device.index, self._timeout_ms)
            side = torch.cuda.Stream(device)
        self._gpu = (device.index, comm, side, torch.cuda.Event(), torch.cuda.Event())
        return self._gpu

    def _check_open(self):
        if self._closed:
            raise RuntimeError("mscclpp: the process group is shut down")

    # ---- running an operation ---------------------------------------------------------------
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
            return _DONE if sync else CompletedWork(result)
        if device.type != "cuda":
            raise _Unsupported("tensors on %s" % device)
        idx, comm, side, ready, done_ev = self._gpu_state(device)
        prev = torch._C._cuda_getDevice()
        if prev != idx:
            torch.cuda.set_device(idx)
        try:
            cur = current_stream(idx)
            if torch._C._cuda_isCurrentStreamCapturing():
                body(comm, cur.cuda_stream)  # captured: in the graph's stream order, nothing else
                return _DONE if sync else CompletedWork(result)
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
                return _DONE
            for t in tensors:
                t.record_stream(side)
            done = torch.cuda.Event()
            done.record(side)
            return CudaWork(done, device, result, host_sync)
        finally:
            if prev != idx:
                torch.cuda.set_device(prev)

    def _reduction(self, kind, send, recv, count, dtype, red, root, comm, stream):
        """One reducing call (allreduce, reducescatter, reduce) with red = (op value, scalar)."""
        op, scalar = red
        if scalar is None:
            _coll(kind, comm, send, recv, count, dtype, op, root, stream)
        else:
            _premul(kind, comm, send, recv, count, dtype, scalar[0], scalar[1], root, stream)

    @staticmethod
    def _red_op(reduce_op, t, device, is_bool=False):
        """(op value, None, None), or (None, (scalar pointer, residence), scalar tensor) for a premul
        sum, for the reduction of tensor t (already in its reduced view) by torch's ReduceOp."""
        kind = reduce_op.op
        if is_bool:
            return _BOOL_OPS[kind], None, None
        if kind in _OPS:
            return _OPS[kind], None, None
        if kind == _RT.PREMUL_SUM:
            factor = reduce_op.__getstate__()[1]
            if isinstance(factor, torch.Tensor):
                if device.type == "cuda" and factor.is_cuda:
                    s = factor.to(device=device, dtype=t.dtype).reshape(1)
                    return None, (s.data_ptr(), 0), s  # read by the kernel (device memory)
                factor = factor.item()
            s = torch.tensor([factor], dtype=t.dtype)
            return None, (s.data_ptr(), 1), s  # copied when the op is made
        raise _Unsupported("ReduceOp %s" % kind.name)

    @staticmethod
    def _prep_red(t, reduce_op):
        """(view, dtype, is_bool) of a tensor to reduce; bool: or/and as max/min."""
        kind = reduce_op.op
        is_bool = t.dtype is torch.bool
        if is_bool and kind not in _BOOL_OPS:
            raise _Unsupported("ReduceOp %s on bool tensors" % kind.name)
        v, dt = _red_view(t, kind)
        return v, dt, is_bool

    def _guard(self, name, fn, *args):
        """fn(*args), turning _Unsupported into NotImplementedError (or the fallback's call)."""
        if self._pending:
            self._flush_p2p()
        try:
            return fn(*args)
        except _Unsupported as e:
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

    # ---- collectives ------------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        return self._guard("allreduce", self._allreduce, tensors, opts or dist.AllreduceOptions())

    def _allreduce(self, tensors, opts):
        if len(tensors) != 1:
            return self._allreduce_many(tensors, opts)
        t = tensors[0]
        rop = opts.reduceOp
        if rop.op in _BITWISE:
            return self._bitwise(t, rop, tensors)
        v, dt, b = self._prep_red(t, rop)
        if v.is_contiguous():
            op, scalar, keep = self._red_op(rop, v, t.device, b)
            p = v.data_ptr()
            if scalar is None and t.device.type == "cpu":  # the common case, without closures
                _coll(AR, self._cpu or self._cpu_comm(), p, p, v.numel(), dt, op, 0, 0)
                return CompletedWork(tensors) if opts.asyncOp else _DONE
            n = v.numel()
            return self._run(t.device, lambda c, s: self._reduction(AR, p, p, n, dt, (op, scalar), 0, c, s),
                             (t, keep) if keep is not None and keep.is_cuda else tensors, tensors,
                             sync=not opts.asyncOp)

        def body(c, s):
            tmp = v.contiguous()
            op, scalar, keep = self._red_op(rop, tmp, t.device, b)
            self._reduction(AR, tmp.data_ptr(), tmp.data_ptr(), tmp.numel(), dt, (op, scalar), 0, c, s)
            v.copy_(tmp)
        return self._run(t.device, body, tensors, tensors, torch_work=True, sync=not opts.asyncOp)

    def _allreduce_many(self, tensors, opts):
        works = [self._allreduce([t], opts) for t in tensors]
        return works[-1] if works else CompletedWork(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        o = dist.AllreduceOptions()
        if opts is not None:
            o.reduceOp = opts.reduceOp
        return self._guard("allreduce_coalesced", self._allreduce_many, tensors, o)

    def _bitwise(self, t, rop, result):
        """BAND/BOR/BXOR of integer or bool tensors: an allgather, then the reduction here."""
        if t.dtype.is_floating_point or t.dtype.is_complex:
            raise _Unsupported("ReduceOp %s on %s tensors" % (rop.op.name, t.dtype))
        fn = _BITWISE[rop.op]
        n = self._size_

        def body(c, s):
            src = _contig(t)
            g = torch.empty((n,) + tuple(t.shape), dtype=t.dtype, device=t.device)
            _coll(AG, c, src.data_ptr(), g.data_ptr(), src.numel() * src.element_size(), _U8, 0, 0, s)
            acc = g[0].clone()
            for i in range(1, n):
                acc = fn(acc, g[i])
            t.copy_(acc)
        return self._run(t.device, body, (t,), result, torch_work=True)

    def broadcast(self, tensors, opts=None):
        return self._guard("broadcast", self._broadcast, tensors, opts or dist.BroadcastOptions())

    def _broadcast(self, tensors, opts):
        root = opts.rootRank
        works = []
        for t in tensors:
            if t.is_contiguous():
                p, nb = t.data_ptr(), t.numel() * t.element_size()
                works.append(self._run(t.device, lambda c, s, p=p, nb=nb: _coll(BC, c, p, p, nb, _U8, 0, root, s),
                                       (t,), tensors, sync=not opts.asyncOp))
            else:
                def body(c, s, t=t):
                    tmp = t.contiguous()
                    _coll(BC, c, tmp.data_ptr(), tmp.data_ptr(), tmp.numel() * tmp.element_size(), _U8, 0, root, s)
                    t.copy_(tmp)
                works.append(self._run(t.device, body, (t,), tensors, torch_work=True))
        return works[-1] if works else CompletedWork(tensors)

    def reduce(self, tensors, opts=None):
        return self._guard("reduce", self._reduce, tensors, opts or dist.ReduceOptions())

    def _reduce(self, tensors, opts):
        t, root, rop = tensors[0], opts.rootRank, opts.reduceOp
        if rop.op in _BITWISE:
            return self._bitwise(t, rop, tensors)  # every rank gets it; root's is what counts
        v, dt, b = self._prep_red(t, rop)

        def body(c, s):
            tmp = _contig(v)
            op, scalar, keep = self._red_op(rop, tmp, t.device, b)
            self._reduction(RED, tmp.data_ptr(), tmp.data_ptr(), tmp.numel(), dt, (op, scalar), root, c, s)
            if tmp is not v and self._rank_ == root:
                v.copy_(tmp)
        return self._run(t.device, body, tensors, tensors, torch_work=not v.is_contiguous()
                         or rop.op == _RT.PREMUL_SUM, sync=not opts.asyncOp)

    def _allgather_base(self, output, input, opts=None):
        return self._guard("_allgather_base", self._allgather_flat, output, input,
                           opts is not None and not opts.asyncOp)

    def _allgather_flat(self, output, input, sync=False):
        if output.numel() != input.numel() * self._size_:
            raise ValueError("mscclpp all_gather_into_tensor: output has %d elements, not %d x %d"
                             % (output.numel(), self._size_, input.numel()))
        nb = input.numel() * input.element_size()
        if output.is_contiguous() and input.is_contiguous():
            i, o = input.data_ptr(), output.data_ptr()
            return self._run(output.device, lambda c, s: _coll(AG, c, i, o, nb, _U8, 0, 0, s), (input, output),
                             [output], sync=sync)

        def body(c, s):
            src, dst = _contig(input), _contig(output)
            _coll(AG, c, src.data_ptr(), dst.data_ptr(), nb, _U8, 0, 0, s)
            if dst is not output:
                output.copy_(dst)
        return self._run(output.device, body, (input, output), [output], torch_work=True)

    def allgather(self, output_tensors, input_tensors, opts=None):
        return self._guard("allgather", self._allgather, output_tensors, input_tensors)

    def _allgather(self, output_tensors, input_tensors):
        outs, t = output_tensors[0], input_tensors[0]
        n = self._size_
        if len(outs) != n or any(o.numel() != t.numel() for o in outs):
            raise ValueError("mscclpp all_gather: needs %d output tensors of %d elements" % (n, t.numel()))

        def body(c, s):
            src = _contig(t)
            flat = torch.empty((n,) + tuple(t.shape), dtype=t.dtype, device=t.device)
            _coll(AG, c, src.data_ptr(), flat.data_ptr(), src.numel() * src.element_size(), _U8, 0, 0, s)
            for o, part in zip(outs, flat):
                o.copy_(part.view(o.shape))
        return self._run(t.device, body, [t] + list(outs), output_tensors, torch_work=True)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        works = [self.allgather([o], [i]) for o, i in zip(output_lists, input_list)]
        return works[-1] if works else CompletedWork(output_lists)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._allgather_base(o, i) for o, i in zip(outputs, inputs)]
        return works[-1] if works else CompletedWork(outputs)

    def _reduce_scatter_base(self, output, input, opts=None):
        return self._guard("_reduce_scatter_base", self._reduce_scatter_flat, output, input,
                           opts or dist.ReduceScatterOptions())

    def _reduce_scatter_flat(self, output, input, opts):
        if input.numel() != output.numel() * self._size_:
            raise ValueError("mscclpp reduce_scatter_tensor: input has %d elements, not %d x %d"
                             % (input.numel(), self._size_, output.numel()))
        rop = opts.reduceOp
        if rop.op in _BITWISE:
            return self._bitwise_rs(output, input.reshape(self._size_, -1), rop)
        vin, dt, b = self._prep_red(input, rop)
        vout, _ = _red_view(output, rop.op)
        if vin.is_contiguous() and vout.is_contiguous():
            op, scalar, keep = self._red_op(rop, vin, output.device, b)
            i, o, n = vin.data_ptr(), vout.data_ptr(), vout.numel()
            keep_t = (input, output, keep) if keep is not None and keep.is_cuda else (input, output)
            return self._run(output.device, lambda c, s: self._reduction(RS, i, o, n, dt, (op, scalar), 0, c, s),
                             keep_t, [output], sync=not opts.asyncOp)

        def body(c, s):
            src, dst = _contig(vin), _contig(vout)
            op, scalar, keep = self._red_op(rop, src, output.device, b)
            self._reduction(RS, src.data_ptr(), dst.data_ptr(), dst.numel(), dt, (op, scalar), 0, c, s)
            if dst is not vout:
                vout.copy_(dst)
        return self._run(output.device, body, (input, output), [output], torch_work=True)

    def _bitwise_rs(self, output, rows, rop):
        tmp = rows.clone()
        w = self._bitwise(tmp, rop, [output])
        w.wait()
        output.copy_(tmp[self._rank_].view(output.shape))
        return w

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        return self._guard("reduce_scatter", self._reduce_scatter, output_tensors, input_tensors,
                           opts or dist.ReduceScatterOptions())

    def _reduce_scatter(self, output_tensors, input_tensors, opts):
        out, ins = output_tensors[0], input_tensors[0]
        n = self._size_
        if len(ins) != n or any(i.numel() != out.numel() for i in ins):
            raise ValueError("mscclpp reduce_scatter: needs %d input tensors of %d elements" % (n, out.numel()))
        rop = opts.reduceOp
        if rop.op in _BITWISE:
            return self._bitwise_rs(out, torch.stack([i.reshape(-1) for i in ins]), rop)
        _, _, b = self._prep_red(out, rop)

        def body(c, s):
            flat = torch.cat([i.reshape(-1) for i in ins])
            vin, dt = _red_view(flat, rop.op)
            dst = _contig(out)
            vout, _ = _red_view(dst, rop.op)
            op, scalar, keep = self._red_op(rop, vin, out.device, b)
            self._reduction(RS, vin.data_ptr(), vout.data_ptr(), vout.numel(), dt, (op, scalar), 0, c, s)
            if dst is not out:
                out.copy_(dst)
        return self._run(out.device, body, [out] + list(ins), output_tensors, torch_work=True)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return works[-1] if works else CompletedWork(outputs)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self._guard("alltoall_base", self._alltoall_base, output, input, output_split_sizes, input_split_sizes,
                           opts is not None and not opts.asyncOp)

    def _alltoall_base(self, output, input, out_splits, in_splits, sync=False):
        n = self._size_
        if not out_splits and not in_splits and input.numel() % n == 0 and output.numel() == input.numel() \
                and input.is_contiguous() and output.is_contiguous():
            i, o, nb = input.data_ptr(), output.data_ptr(), input.numel() * input.element_size() // n
            return self._run(output.device, lambda c, s: _coll(A2A, c, i, o, nb, _U8, 0, 0, s), (input, output),
                             [output], sync=sync)
        # uneven: one group of sends and receives (rows of the first dimension)
        rows_in = input.shape[0] if input.dim() else 1
        rows_out = output.shape[0] if output.dim() else 1
        in_splits = list(in_splits) if in_splits else [rows_in // n] * n
        out_splits = list(out_splits) if out_splits else [rows_out // n] * n
        if len(in_splits) != n or len(out_splits) != n or sum(in_splits) != rows_in or sum(out_splits) != rows_out:
            raise ValueError("mscclpp all_to_all_single: split sizes %s / %s do not fit %d ranks and %d / %d rows"
                             % (in_splits, out_splits, n, rows_in, rows_out))
        row_in = input.numel() * input.element_size() // max(rows_in, 1)
        row_out = output.numel() * output.element_size() // max(rows_out, 1)

        def body(c, s):
            src, dst = _contig(input), _contig(output)
            ops, off_i, off_o, pi, po = [], 0, 0, src.data_ptr(), dst.data_ptr()
            for p in range(n):
                if in_splits[p]:
                    ops.append((1, pi + off_i, in_splits[p] * row_in, p))
                if out_splits[p]:
                    ops.append((0, po + off_o, out_splits[p] * row_out, p))
                off_i += in_splits[p] * row_in
                off_o += out_splits[p] * row_out
            _p2p(c, ops, s)
            if dst is not output:
                output.copy_(dst)
        return self._run(output.device, body, (input, output), [output], torch_work=True)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        return self._guard("alltoall", self._alltoall, output_tensors, input_tensors)

    def _alltoall(self, outs, ins):
        n = self._size_
        if len(outs) != n or len(ins) != n:
            raise ValueError("mscclpp all_to_all: needs %d input and output tensors" % n)
        return self._p2p_lists(outs[0].device, [(1, t, p) for p, t in enumerate(ins)]
                               + [(0, t, p) for p, t in enumerate(outs)], outs)

    def scatter(self, output_tensors, input_tensors, opts=None):
        return self._guard("scatter", self._scatter, output_tensors, input_tensors, opts.rootRank if opts else 0)

    def _scatter(self, output_tensors, input_tensors, root):
        ops = [(0, output_tensors[0], root)]
        if self._rank_ == root:
            ops += [(1, t, p) for p, t in enumerate(input_tensors[0])]
        return self._p2p_lists(output_tensors[0].device, ops, output_tensors)

    def gather(self, output_tensors, input_tensors, opts=None):
        return self._guard("gather", self._gather, output_tensors, input_tensors, opts.rootRank if opts else 0)

    def _gather(self, output_tensors, input_tensors, root):
        ops = [(1, input_tensors[0], root)]
        if self._rank_ == root:
            ops += [(0, t, p) for p, t in enumerate(output_tensors[0])]
        return self._p2p_lists(input_tensors[0].device, ops, output_tensors)

    def _p2p_lists(self, device, ops, result):
        """One group of (is_send, tensor, peer) now; non-contiguous tensors go through copies."""
        def body(c, s):
            calls, back = [], []
            for send, t, peer in ops:
                x = _contig(t)
                if not send and x is not t:
                    back.append((t, x))
                calls.append((send, x.data_ptr(), x.numel() * x.element_size(), peer))
            _p2p(c, calls, s)
            for t, x in back:
                t.copy_(x)
        torch_work = any(not t.is_contiguous() for _, t, _ in ops)
        return self._run(device, body, [t for _, t, _ in ops], result, torch_work=torch_work)

    # ---- point to point ---------------------------------------------------------------------
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

    # ---- barrier, subgroups, teardown --------------------------------------------------------
    def barrier(self, opts=None):
        if self._pending:
            self._flush_p2p()
        device = getattr(opts, "device", None) if opts is not None else None
        if device is not None and device.type == "cuda":
            if device.index is None:
                device = torch.device("cuda", torch.cuda.current_device())
            t = torch.zeros(1, device=device)
            w = self._run(device, lambda c, s: _coll(AR, c, t.data_ptr(), t.data_ptr(), 1, _DTYPES[torch.float32],
                                                     0, 0, s), (t,), [t], host_sync=True)
            w.wait()
            return w
        self._cpu_comm().barrier()
        return CompletedWork([])

    def split_group(self, ranks, timeout=None, opts=None, group_name=None, group_desc=None):
        """The group of ranks (ranks of this group, this rank among them) as a new MscclppProcessGroup
        with its own communicators, or None when this rank is not in ranks. Every rank of this group
        calls it, each with its own part of the split, in the same order (as torch's split_group)."""
        self._splits += 1
        ranks = sorted(int(r) for r in ranks)
        if self._rank_ not in ranks:
            return None
        prefix = "mscclpp/split/%d/%s/" % (self._splits, ",".join(map(str, ranks)))
        pg = MscclppProcessGroup(dist.PrefixStore(prefix, self._store), ranks.index(self._rank_), len(ranks),
                                 timeout or self._timeout, ranks=ranks)
        pg.setGroupName(group_name or (self._group_name + ":split:%d" % self._splits))
        pg.setGroupDesc(group_desc or (self._group_desc + ":split:%d" % self._splits))
        return pg

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


def split_group(split_ranks, parent_pg=None, timeout=None, group_desc=None):
    """torch.distributed.split_group for mscclpp groups (torch's own needs a C++ backend that splits):
    split_ranks is a list of lists of parent-group ranks; every rank of the parent calls it; returns
    this rank's new group (registered with torch.distributed like any group), or None."""
    from torch.distributed import distributed_c10d as c10d

    parent = parent_pg or c10d._get_default_group()
    g2l = c10d._world.pg_group_ranks[parent]
    l2g = {v: k for k, v in g2l.items()}
    me = parent.rank()
    mine = next((sorted(r) for r in split_ranks if me in r), None)
    if mine is None:
        parent.split_group([], timeout=timeout)  # keeps the split count in step with the members
        return None
    name = c10d._process_group_name(mine, use_hashed_name=True)
    pg = parent.split_group(mine, timeout=timeout, group_name=name, group_desc=group_desc)
    backend = dist.Backend("mscclpp")
    c10d._world.pg_map[pg] = (backend, pg.get_group_store())
    c10d._world.pg_names[pg] = name
    c10d._register_process_group(name, pg)
    c10d._world.pg_backend_config[pg] = str(c10d.BackendConfig(backend))
    tag = "ptd:" + name
    c10d._world.tags_to_pg.setdefault(tag, []).append(pg)
    c10d._world.pg_to_tag[pg] = tag
    c10d._world.pg_group_ranks[pg] = {l2g[r]: i for i, r in enumerate(mine)}
    return pg
