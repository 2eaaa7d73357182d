"""A small training run on synthetic tokens through torch.distributed: DDP or FSDP2 (fully_shard)
over a process group of the backend under test (nccl, mscclpp, gloo). One process per rank under
torchrun:

    torchrun --nproc_per_node 4 examples/torch-training/train.py --backend mscclpp --mode fsdp
    torchrun --nproc_per_node 2 examples/torch-training/train.py --backend gloo --device cpu --steps 3

Deterministic: every rank builds the model from the same seed; every step draws one global batch
from a generator seeded by (seed, step) and rank r trains on slice r of it, so a run's losses depend
only on the arguments and the world size, not on the backend beyond rounding. Rank 0 prints the
loss averaged over ranks every --log-every steps and last one machine-readable line:

    RESULT backend=B mode=M model=X dtype=D world=W steps=N final_loss=%.6f tokens_per_s=%.1f

tokens/s counts every rank's tokens over the steps after the first --warmup (default 3), timed
between device synchronizations (0.0 when there are no steps after the warm-up)."""
import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="nccl", help="torch.distributed backend: nccl, mscclpp, gloo, ...")
    p.add_argument("--mode", choices=("ddp", "fsdp"), default="ddp")
    p.add_argument("--model", choices=("transformer", "mlp"), default="transformer")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="compute dtype (parameters and optimizer state stay float32)")
    p.add_argument("--reduce-dtype", choices=("float32", "bfloat16"), default="float32",
                   help="gradient reduction dtype (DDP: bf16_compress_hook; FSDP: MixedPrecisionPolicy)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="steps left out of tokens/s")
    p.add_argument("--log-every", type=int, default=5, help="print the loss every k steps (0: only the last)")
    p.add_argument("--batch", type=int, default=8, help="sequences per rank and step")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args(argv)


# --- model ---------------------------------------------------------------------------------------

class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Mlp(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-LayerNorm residual block: attention (omitted in the mlp model) then MLP."""

    def __init__(self, dim, heads, attention: bool):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim) if attention else None
        self.attn = Attention(dim, heads) if attention else None
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim)

    def forward(self, x):
        if self.attn is not None:
            x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """Token (+ position, with attention) embedding, `layers` blocks, final LayerNorm, vocab head.
    forward(tokens [B, T]) -> logits [B, T, vocab]."""

    def __init__(self, vocab, dim, layers, heads, seq, attention: bool):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02) if attention else None
        self.blocks = nn.ModuleList(Block(dim, heads, attention) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.tok(tokens)
        if self.pos is not None:
            x = x + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


# --- data ----------------------------------------------------------------------------------------

class SyntheticTokens:
    """A learnable stream: each next token is perm[previous] with probability 0.9, else uniform.
    batch(step) returns this rank's (inputs, targets) [B, T] slice of the step's global batch."""

    def __init__(self, args, rank, world, device):
        self.args, self.rank, self.world, self.device = args, rank, world, device
        self.perm = torch.randperm(args.vocab, generator=torch.Generator().manual_seed(args.seed + 1))

    def batch(self, step):
        a = self.args
        g = torch.Generator().manual_seed(a.seed * 100003 + step)
        n = a.batch * self.world
        seqs = torch.empty(n, a.seq + 1, dtype=torch.long)
        seqs[:, 0] = torch.randint(a.vocab, (n,), generator=g)
        noise = torch.randint(a.vocab, (n, a.seq), generator=g)
        keep = torch.rand(n, a.seq, generator=g) < 0.9
        for t in range(a.seq):
            seqs[:, t + 1] = torch.where(keep[:, t], self.perm[seqs[:, t]], noise[:, t])
        mine = seqs[self.rank * a.batch:(self.rank + 1) * a.batch].to(self.device, non_blocking=True)
        return mine[:, :-1], mine[:, 1:]


# --- setup ---------------------------------------------------------------------------------------

def init_distributed(args):
    """Imports the mscclpp backend when asked for, starts the default process group; returns
    (rank, world, device)."""
    if args.backend == "mscclpp":
        try:
            import mscclpp.torch  # noqa: F401  (registers the "mscclpp" backend)
        except ImportError as e:
            sys.exit("train.py: --backend mscclpp needs the mscclpp package with its torch backend "
                     "(import mscclpp.torch failed: %s)" % e)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if args.device == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        # Binding the device lets NCCL start eagerly; other backends get the plain call.
        extra = {"device_id": device} if args.backend == "nccl" else {}
        dist.init_process_group(args.backend, **extra)
    else:
        device = torch.device("cpu")
        dist.init_process_group(args.backend)
    return rank, world, device


def wrap(model, args, device):
    """DDP, or FSDP2 (fully_shard on each block, then the root) over the default group."""
    compute = getattr(torch, args.dtype)
    reduce = getattr(torch, args.reduce_dtype)
    if args.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        if reduce == torch.bfloat16:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        return ddp
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    # The mesh over the default group itself (init_device_mesh might make a new group of another
    # backend, e.g. nccl when the default is gloo on a host with GPUs).
    mesh = DeviceMesh.from_group(dist.group.WORLD, device.type)
    mp = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=reduce)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    return model


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def mean_over_ranks(loss):
    """The loss averaged over ranks (SUM then divide: not every backend has AVG)."""
    t = loss.detach().float().clone()
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()


def main(argv=None):
    args = parse_args(argv)
    rank, world, device = init_distributed(args)
    torch.manual_seed(args.seed)  # same initial weights on every rank
    model = TinyLM(args.vocab, args.dim, args.layers, args.heads, args.seq,
                   attention=args.model == "transformer").to(device)
    model = wrap(model, args, device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    data = SyntheticTokens(args, rank, world, device)
    batches = [data.batch(step) for step in range(args.steps)]  # made up front: not in the timing
    # DDP computes in the compute dtype through autocast; FSDP casts through its policy.
    autocast = args.mode == "ddp" and args.dtype == "bfloat16"
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())  # DTensor: the global size
        print("train.py: %s %s %s, %d ranks, %s on %s, ~%.1fM parameters, %d steps of %d x %d tokens per rank"
              % (args.backend, args.mode, args.model, world, args.dtype, device.type, params / 1e6,
                 args.steps, args.batch, args.seq), flush=True)

    final, start = float("nan"), None
    for step, (inputs, targets) in enumerate(batches):
        if step == args.warmup:
            synchronize(device)
            start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        last = step == args.steps - 1
        if last or (args.log_every and (step + 1) % args.log_every == 0):
            final = mean_over_ranks(loss)
            if rank == 0:
                print("step %4d  loss %.6f" % (step + 1, final), flush=True)
    synchronize(device)
    timed = args.steps - args.warmup
    tokens_per_s = timed * world * args.batch * args.seq / (time.perf_counter() - start) if timed > 0 else 0.0
    if rank == 0:
        print("RESULT backend=%s mode=%s model=%s dtype=%s world=%d steps=%d final_loss=%.6f tokens_per_s=%.1f"
              % (args.backend, args.mode, args.model, args.dtype, world, args.steps, final, tokens_per_s), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if math.isfinite(final) else 1


if __name__ == "__main__":
    sys.exit(main())
