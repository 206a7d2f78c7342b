"""A small Llama-style transformer under the YOCO agent, sharded with FSDP2 over a DeviceMesh:
FSDP, HSDP, FSDP x TP.

    yoco-agent run --workers 4 --spares 1 -- python agent/examples/llama.py --shard 4
    yoco-agent run --workers 4 --spares 1 -- python agent/examples/llama.py --replicate 2 --shard 2
    yoco-agent run --workers 4 --spares 1 -- python agent/examples/llama.py --shard 2 --tp 2

The mesh has up to three named dimensions, replicate x shard x tp = world size (a dimension of
size 1 is left out). `fully_shard` shards every transformer block, then the root, over
(replicate, shard): one dimension gives FSDP, two give HSDP (each shard group holds one copy of
the state; the replicas all-reduce). Tensor parallelism splits the attention and MLP projections
over `tp` the way torchtitan does (column-wise in, row-wise out), without sequence parallelism.
CPU and gloo, as in the tests.

The agent lines: attach, device_mesh, register, steps, step. A spare waits in `device_mesh`
until it takes a rank over, then builds as that rank. A killed rank's shards come back from its
buddy's mirror (its replica's under HSDP): tests/agent/test_sharded_tp_kill.py.

Read top to bottom: the model, how it is parallelised, the optimizer, schedule and clipping,
`build()` (everything a training job is made of), then the loop in `main()`.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
)
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)
from torch.nn import functional as F

import agent
from agent.examples.data import SyntheticTokens

# ---------------------------------------------------------------------------------------------
# The model


class RMSNorm(nn.Module):
    """Scale by the root mean square (no mean subtraction, no bias), then by a learned gain."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(head_dim: int, seq: int, theta: float = 10000.0) -> torch.Tensor:
    """cos and sin of each position's rotation angles, stacked: (2, seq, head_dim)."""
    frequencies = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq).float(), frequencies)
    angles = torch.cat([angles, angles], dim=-1)  # one angle per pair (i, i + head_dim / 2)
    return torch.stack([angles.cos(), angles.sin()])


def apply_rotary(x: torch.Tensor, rotary: torch.Tensor) -> torch.Tensor:
    """Rotate each pair of channels of `x` (batch, heads, seq, head_dim) by its position's angle:
    attention scores then depend on the distance between positions only."""
    cos, sin = rotary[0, : x.shape[2]], rotary[1, : x.shape[2]]
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


class Attention(nn.Module):
    """Causal self-attention with grouped-query attention: `kv_heads` key/value heads, each
    shared by heads / kv_heads query heads. Under tensor parallelism each rank holds a slice of
    the heads; the head counts are read from the projections' outputs, so the code is the same."""

    def __init__(self, dim: int, heads: int, kv_heads: int):
        super().__init__()
        self.head_dim = dim // heads
        self.queries_per_kv = heads // kv_heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, rotary: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        # (batch, heads, seq, head_dim); `-1`: the heads this rank holds
        q = self.wq(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, rotary), apply_rotary(k, rotary)
        k = k.repeat_interleave(self.queries_per_kv, dim=1)
        v = v.repeat_interleave(self.queries_per_kv, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    """SwiGLU: silu(x W1) * (x W3), projected back by W2."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads, kv_heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, hidden)

    def forward(self, x: torch.Tensor, rotary: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), rotary)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab: int, seq: int, dim: int, heads: int, kv_heads: int, layers: int):
        super().__init__()
        # Llama's SwiGLU width: 2/3 of 4 * dim (three matrices instead of two), rounded up.
        hidden = 16 * math.ceil(8 * dim / 3 / 16)
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            TransformerBlock(dim, heads, kv_heads, hidden) for _ in range(layers)
        )
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        # Derived from the shape alone: not state, so not in the state dict.
        self.register_buffer("rotary", rotary_tables(dim // heads, seq), persistent=False)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, self.rotary)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


# ---------------------------------------------------------------------------------------------
# Parallelism


def build_mesh(run: agent.Run, replicate: int, shard: int, tp: int) -> DeviceMesh:
    """The agent's mesh over (replicate, shard, tp), without the dimensions of size 1 (job.started
    reports the others as the job's parallelism). A spare waits here for the rank it takes."""
    sizes = {"replicate": replicate, "shard": shard, "tp": tp}
    sizes = {name: size for name, size in sizes.items() if size > 1 or name == "shard"}
    return run.device_mesh(tuple(sizes), tuple(sizes.values()))


def apply_tensor_parallel(model: Llama, tp_mesh: DeviceMesh) -> None:
    """Each block's projections split over `tp_mesh`: the inputs' projections by output column
    (each rank computes some heads / some hidden units), the outputs' by input row (partial sums,
    all-reduced). Embedding, norms and output head stay whole on every TP rank."""
    plan = {
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w3": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(),
    }
    for block in model.layers:
        # Every rank built the same whole model, so each keeps its own slice of it. The default
        # (src_data_rank=0) scatters the first TP rank's slices instead, which the agent's groups
        # cannot do: torch's Python process groups have no scatter.
        parallelize_module(block, tp_mesh, plan, src_data_rank=None)


def apply_fsdp(model: Llama, dp_mesh: DeviceMesh) -> None:
    """FSDP2: one all-gather / reduce-scatter unit per block, the rest (embedding, final norm,
    output) in the root's. A 2-D `dp_mesh` (replicate, shard) makes it HSDP."""
    for block in model.layers:
        fully_shard(block, mesh=dp_mesh)
    fully_shard(model, mesh=dp_mesh)


# ---------------------------------------------------------------------------------------------
# Optimizer, schedule, clipping


def adamw(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """Weight decay on the matrices (projections, embedding) only, not on the norms' gains."""
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    groups = [
        {"params": matrices, "weight_decay": weight_decay},
        {"params": vectors, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def warmup_cosine(
    optimizer: torch.optim.Optimizer, steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over the first tenth, then cosine decay to a tenth of the peak."""
    warmup = max(1, steps // 10)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def clip_grad_norm(model: nn.Module, max_norm: float) -> torch.Tensor:
    """torch.nn.utils.clip_grad_norm_ across meshes. Gradients are DTensors; with tensor
    parallelism the projections' live on (…, shard, tp) and the rest on (…, shard), and one
    norm over both is not defined for DTensors. So: each mesh's norm, made whole (a collective
    over that mesh), combined into the global norm, which then scales every gradient.

    On a 2-D mesh DTensor warns that it all-reduces one dimension after the other and that
    ranks "may" then differ: every rank runs the same two reductions in the same order, so they
    all get the same bits."""
    by_mesh: dict[DeviceMesh, list[nn.Parameter]] = defaultdict(list)
    for p in model.parameters():
        if p.grad is not None:
            by_mesh[p.grad.device_mesh].append(p)
    norms = [
        torch.nn.utils.get_total_norm([p.grad for p in params]).full_tensor()
        for params in by_mesh.values()
    ]
    total = torch.linalg.vector_norm(torch.stack(norms))
    for params in by_mesh.values():
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total


# ---------------------------------------------------------------------------------------------
# The job


@dataclass
class Training:
    mesh: DeviceMesh
    model: Llama
    optimizer: torch.optim.AdamW
    scheduler: torch.optim.lr_scheduler.LambdaLR
    data: SyntheticTokens


def build(args: argparse.Namespace, run: agent.Run) -> Training:
    """Mesh, model (tensor-parallel, then FSDP-sharded), optimizer, schedule and data position
    for this rank (a spare's: the rank it takes over)."""
    mesh = build_mesh(run, args.replicate, args.shard, args.tp)
    torch.manual_seed(args.seed)  # the same whole model on every rank before it is split
    model = Llama(args.vocab, args.seq, args.dim, args.heads, args.kv_heads, args.layers)
    if args.tp > 1:
        apply_tensor_parallel(model, mesh["tp"])
    apply_fsdp(model, mesh["replicate", "shard"] if args.replicate > 1 else mesh["shard"])
    # After sharding: the optimizer must hold the sharded parameters fully_shard put in place.
    optimizer = adamw(model, args.lr, args.weight_decay)
    scheduler = warmup_cosine(optimizer, args.steps)
    # The ranks of one TP group (tp is the mesh's last dimension: consecutive ranks) work on the
    # same batch: data is drawn per data-parallel rank.
    data = SyntheticTokens(args.seed, run.rank // args.tp, args.batch, args.seq, args.vocab)
    return Training(mesh, model, optimizer, scheduler, data)


def local_state(training: Training) -> dict:
    """This rank's own part of the training state: the local shards of every parameter and
    optimizer tensor (a DTensor's local tensor), keyed by parameter name."""

    def local(value):
        if isinstance(value, DTensor):
            return value.to_local()
        if isinstance(value, dict):
            return {key: local(v) for key, v in value.items()}
        return value

    return {
        "model": local(get_model_state_dict(training.model)),
        "optimizer": local(get_optimizer_state_dict(training.model, training.optimizer)),
    }


def add_model_args(p: argparse.ArgumentParser) -> None:
    """Model, data, schedule and mesh options (benchmarks that train the same job reuse them)."""
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2, help="key/value heads (GQA)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8, help="sequences per data-parallel rank")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clipped to this")
    p.add_argument("--replicate", type=int, default=1, help="replicas of the sharded state (HSDP)")
    p.add_argument("--shard", type=int, default=1, help="ranks the state is sharded over (FSDP)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_args(p)
    p.add_argument("--log-every", type=int, default=20, help="rank 0 prints its loss every N steps")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds; slows tests down")
    p.add_argument("--out", type=Path, help="write each rank's final local state here")
    args = p.parse_args()
    if args.heads % args.kv_heads or args.kv_heads % args.tp:
        p.error("--heads must be a multiple of --kv-heads, and --kv-heads of --tp")
    return args


def main() -> None:
    args = parse_args()
    run = agent.attach()  # a worker, or a spare until it takes a rank over
    training = build(args, run)
    run.register(
        model=training.model,
        optimizer=training.optimizer,
        scheduler=training.scheduler,
        data=training.data,
    )

    for step in run.steps(args.steps):
        inputs, targets = training.data.next_batch()
        loss = training.model(inputs, targets)
        loss.backward()  # FSDP reduce-scatters (and, under HSDP, all-reduces) the gradients
        clip_grad_norm(training.model, args.clip)
        run.step()  # optimizer.step(), scheduler.step(), zero the gradients
        if run.rank == 0 and (step % args.log_every == 0 or step == args.steps - 1):
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save(local_state(training), args.out / f"rank{run.rank}.pt")


if __name__ == "__main__":
    main()
