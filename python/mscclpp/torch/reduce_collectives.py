"""The reducing collectives of MscclppProcessGroup: allreduce, reduce and reduce_scatter (with their
coalesced forms), ReduceOps the library has natively and BAND/BOR/BXOR through an allgather."""
import torch
import torch.distributed as dist

from mscclpp.torch.dtypes import BITWISE, DTYPES, OPS_BY_VALUE, RT, Unsupported, contig, prep_red, red_op, red_view
from mscclpp.torch.library import AG, AR, RED, RS, U8, coll, reduction
from mscclpp.torch.runner import DONE
from mscclpp.torch.work import CompletedWork


class ReduceCollectivesMixin:
    """Part of MscclppProcessGroup: its reducing collectives, each run through _guard and _run."""

    def allreduce(self, tensors, opts=None):
        if opts is not None and len(tensors) == 1 and not opts.asyncOp:
            t = tensors[0]
            op, dt = OPS_BY_VALUE.get(opts.reduceOp.op.value), DTYPES.get(t.dtype)
            if op is not None and dt is not None and self._call_now(AR, t, t, t.numel(), dt, op):
                return DONE
        return self._guard("allreduce", self._allreduce, tensors, opts or dist.AllreduceOptions())

    def _allreduce(self, tensors, opts):
        if len(tensors) != 1:
            return self._allreduce_many(tensors, opts)
        t = tensors[0]
        rop = opts.reduceOp
        if rop.op in BITWISE:
            return self._bitwise(t, rop, tensors)
        v, dt, b = prep_red(t, rop)
        if v.is_contiguous():
            op, scalar, keep = red_op(rop, v, t.device, b)
            p = v.data_ptr()
            if scalar is None and t.device.type == "cpu":  # the common case, without closures
                coll(AR, self._cpu or self._cpu_comm(), p, p, v.numel(), dt, op, 0, 0)
                return CompletedWork(tensors) if opts.asyncOp else DONE
            n = v.numel()
            return self._run(t.device, lambda c, s: reduction(AR, p, p, n, dt, (op, scalar), 0, c, s),
                             (t, keep) if keep is not None and keep.is_cuda else tensors, tensors,
                             sync=not opts.asyncOp)

        def body(c, s):
            tmp = v.contiguous()
            op, scalar, keep = red_op(rop, tmp, t.device, b)
            reduction(AR, tmp.data_ptr(), tmp.data_ptr(), tmp.numel(), dt, (op, scalar), 0, c, s)
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
            raise Unsupported("ReduceOp %s on %s tensors" % (rop.op.name, t.dtype))
        fn = BITWISE[rop.op]
        n = self._size_

        def body(c, s):
            src = contig(t)
            g = torch.empty((n,) + tuple(t.shape), dtype=t.dtype, device=t.device)
            coll(AG, c, src.data_ptr(), g.data_ptr(), src.numel() * src.element_size(), U8, 0, 0, s)
            acc = g[0].clone()
            for i in range(1, n):
                acc = fn(acc, g[i])
            t.copy_(acc)
        return self._run(t.device, body, (t,), result, torch_work=True)

    def reduce(self, tensors, opts=None):
        return self._guard("reduce", self._reduce, tensors, opts or dist.ReduceOptions())

    def _reduce(self, tensors, opts):
        t, root, rop = tensors[0], opts.rootRank, opts.reduceOp
        if rop.op in BITWISE:
            return self._bitwise(t, rop, tensors)  # every rank gets it; root's is what counts
        v, dt, b = prep_red(t, rop)

        def body(c, s):
            tmp = contig(v)
            op, scalar, keep = red_op(rop, tmp, t.device, b)
            reduction(RED, tmp.data_ptr(), tmp.data_ptr(), tmp.numel(), dt, (op, scalar), root, c, s)
            if tmp is not v and self._rank_ == root:
                v.copy_(tmp)
        return self._run(t.device, body, tensors, tensors, torch_work=not v.is_contiguous()
                         or rop.op == RT.PREMUL_SUM, sync=not opts.asyncOp)

    def _reduce_scatter_base(self, output, input, opts=None):
        if opts is not None and not opts.asyncOp and input.numel() == output.numel() * self._size_:
            op, dt = OPS_BY_VALUE.get(opts.reduceOp.op.value), DTYPES.get(input.dtype)
            if (op is not None and dt is not None and output.dtype == input.dtype
                    and self._call_now(RS, input, output, output.numel(), dt, op)):
                return DONE
        return self._guard("_reduce_scatter_base", self._reduce_scatter_flat, output, input,
                           opts or dist.ReduceScatterOptions())

    def _reduce_scatter_flat(self, output, input, opts):
        if input.numel() != output.numel() * self._size_:
            raise ValueError("mscclpp reduce_scatter_tensor: input has %d elements, not %d x %d"
                             % (input.numel(), self._size_, output.numel()))
        rop = opts.reduceOp
        if rop.op in BITWISE:
            return self._bitwise_rs(output, input.reshape(self._size_, -1), rop)
        vin, dt, b = prep_red(input, rop)
        vout, _ = red_view(output, rop.op)
        if vin.is_contiguous() and vout.is_contiguous():
            op, scalar, keep = red_op(rop, vin, output.device, b)
            i, o, n = vin.data_ptr(), vout.data_ptr(), vout.numel()
            keep_t = (input, output, keep) if keep is not None and keep.is_cuda else (input, output)
            return self._run(output.device, lambda c, s: reduction(RS, i, o, n, dt, (op, scalar), 0, c, s),
                             keep_t, [output], sync=not opts.asyncOp)

        def body(c, s):
            src, dst = contig(vin), contig(vout)
            op, scalar, keep = red_op(rop, src, output.device, b)
            reduction(RS, src.data_ptr(), dst.data_ptr(), dst.numel(), dt, (op, scalar), 0, c, s)
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
        if rop.op in BITWISE:
            return self._bitwise_rs(out, torch.stack([i.reshape(-1) for i in ins]), rop)
        _, _, b = prep_red(out, rop)

        def body(c, s):
            flat = torch.cat([i.reshape(-1) for i in ins])
            vin, dt = red_view(flat, rop.op)
            dst = contig(out)
            vout, _ = red_view(dst, rop.op)
            op, scalar, keep = red_op(rop, vin, out.device, b)
            reduction(RS, vin.data_ptr(), vout.data_ptr(), vout.numel(), dt, (op, scalar), 0, c, s)
            if dst is not out:
                out.copy_(dst)
        return self._run(out.device, body, [out] + list(ins), output_tensors, torch_work=True)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return works[-1] if works else CompletedWork(outputs)
