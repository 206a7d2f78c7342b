"""A small GPT-style transformer trained under the YOCO agent.

    yoco-agent run --workers 4 --spares 2 -- python agent/examples/gpt.py --steps 200

Five lines touch the agent: attach, register, steps, step (and the spare-aware rank below).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

import agent
from agent.examples.data import SyntheticTokens


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = self.dropout(att.masked_fill(~mask, float("-inf")).softmax(-1))
        x = x + self.dropout(self.proj((att @ v).transpose(1, 2).reshape(b, t, d)))
        return x + self.dropout(self.mlp(self.norm2(x)))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, dim: int, heads: int, layers: int, dropout: float):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.dropout(self.tokens(idx) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The model, data and schedule options (benchmarks that train the same job reuse them)."""
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    add_model_args(p)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds; slows demos down")
    p.add_argument("--out", type=Path, help="write each rank's final state here")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    run = agent.attach()
    torch.manual_seed(args.seed)  # same initial weights on every rank and spare
    model = GPT(args.vocab, args.seq, args.dim, args.heads, args.layers, args.dropout)
    model.to(run.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    warmup = max(1, args.steps // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / args.steps)),
    )
    # A spare has no rank yet: it builds as rank 0 and, taking a rank over, receives that rank's
    # data position and RNG streams (registered state), so nothing of rank 0's is left.
    rank = 0 if run.is_spare else run.rank
    data = SyntheticTokens(args.seed, rank, args.batch, args.seq, args.vocab)
    # Dropout draws from the global RNG; seed it per rank so ranks differ, reproducibly.
    torch.manual_seed(args.seed * 7919 + rank)
    run.register(model=model, optimizer=optimizer, scheduler=scheduler, data=data)

    for step in run.steps(args.steps):
        inputs, targets = data.next_batch()
        loss = model(inputs.to(run.device), targets.to(run.device))
        loss.backward()
        run.step()
        if run.rank == 0 and step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save(state, args.out / f"rank{run.rank}.pt")


if __name__ == "__main__":
    main()
