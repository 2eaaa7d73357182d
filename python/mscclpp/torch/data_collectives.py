"""The collectives of MscclppProcessGroup that move data without reducing it: broadcast, allgather
(with its coalesced forms), alltoall, scatter and gather (any dtype, as bytes)."""
import torch
import torch.distributed as dist

from mscclpp.torch.dtypes import contig
from mscclpp.torch.library import A2A, AG, BC, U8, coll, p2p
from mscclpp.torch.runner import DONE
from mscclpp.torch.work import CompletedWork


class DataCollectivesMixin:
    """Part of MscclppProcessGroup: its data-moving collectives, each run through _guard and _run;
    alltoall, scatter and gather as one group of sends and receives (_p2p_lists)."""

    def broadcast(self, tensors, opts=None):
        return self._guard("broadcast", self._broadcast, tensors, opts or dist.BroadcastOptions())

    def _broadcast(self, tensors, opts):
        root = opts.rootRank
        works = []
        for t in tensors:
            if t.is_contiguous():
                p, nb = t.data_ptr(), t.numel() * t.element_size()
                works.append(self._run(t.device, lambda c, s, p=p, nb=nb: coll(BC, c, p, p, nb, U8, 0, root, s),
                                       (t,), tensors, sync=not opts.asyncOp))
            else:
                def body(c, s, t=t):
                    tmp = t.contiguous()
                    coll(BC, c, tmp.data_ptr(), tmp.data_ptr(), tmp.numel() * tmp.element_size(), U8, 0, root, s)
                    t.copy_(tmp)
                works.append(self._run(t.device, body, (t,), tensors, torch_work=True))
        return works[-1] if works else CompletedWork(tensors)

    def _allgather_base(self, output, input, opts=None):
        if (opts is not None and not opts.asyncOp and output.numel() == input.numel() * self._size_
                and output.dtype == input.dtype
                and self._call_now(AG, input, output, input.numel() * input.element_size(), U8, 0)):
            return DONE
        return self._guard("_allgather_base", self._allgather_flat, output, input,
                           opts is not None and not opts.asyncOp)

    def _allgather_flat(self, output, input, sync=False):
        if output.numel() != input.numel() * self._size_:
            raise ValueError("mscclpp all_gather_into_tensor: output has %d elements, not %d x %d"
                             % (output.numel(), self._size_, input.numel()))
        nb = input.numel() * input.element_size()
        if output.is_contiguous() and input.is_contiguous():
            i, o = input.data_ptr(), output.data_ptr()
            return self._run(output.device, lambda c, s: coll(AG, c, i, o, nb, U8, 0, 0, s), (input, output),
                             [output], sync=sync)

        def body(c, s):
            src, dst = contig(input), contig(output)
            coll(AG, c, src.data_ptr(), dst.data_ptr(), nb, U8, 0, 0, s)
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
            src = contig(t)
            flat = torch.empty((n,) + tuple(t.shape), dtype=t.dtype, device=t.device)
            coll(AG, c, src.data_ptr(), flat.data_ptr(), src.numel() * src.element_size(), U8, 0, 0, s)
            for o, part in zip(outs, flat):
                o.copy_(part.view(o.shape))
        return self._run(t.device, body, [t] + list(outs), output_tensors, torch_work=True)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        works = [self.allgather([o], [i]) for o, i in zip(output_lists, input_list)]
        return works[-1] if works else CompletedWork(output_lists)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._allgather_base(o, i) for o, i in zip(outputs, inputs)]
        return works[-1] if works else CompletedWork(outputs)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self._guard("alltoall_base", self._alltoall_base, output, input, output_split_sizes, input_split_sizes,
                           opts is not None and not opts.asyncOp)

    def _alltoall_base(self, output, input, out_splits, in_splits, sync=False):
        n = self._size_
        if not out_splits and not in_splits and input.numel() % n == 0 and output.numel() == input.numel() \
                and input.is_contiguous() and output.is_contiguous():
            i, o, nb = input.data_ptr(), output.data_ptr(), input.numel() * input.element_size() // n
            return self._run(output.device, lambda c, s: coll(A2A, c, i, o, nb, U8, 0, 0, s), (input, output),
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
            src, dst = contig(input), contig(output)
            ops, off_i, off_o, pi, po = [], 0, 0, src.data_ptr(), dst.data_ptr()
            for p in range(n):
                if in_splits[p]:
                    ops.append((1, pi + off_i, in_splits[p] * row_in, p))
                if out_splits[p]:
                    ops.append((0, po + off_o, out_splits[p] * row_out, p))
                off_i += in_splits[p] * row_in
                off_o += out_splits[p] * row_out
            p2p(c, ops, s)
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
