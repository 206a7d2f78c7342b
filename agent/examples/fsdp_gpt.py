"""The GPT of gpt.py sharded with FSDP2 (`fully_shard` per block) under the YOCO agent.

    yoco-agent run --workers 4 --spares 2 -- python agent/examples/fsdp_gpt.py --shard 4
    yoco-agent run --workers 4 -- python agent/examples/fsdp_gpt.py --replicate 2 --shard 2

The agent lines: attach, device_mesh, register, steps, step. Every rank holds a shard of the
parameters and of the optimizer state; FSDP2 reduce-scatters the gradients in backward.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

import agent
from agent.examples.data import SyntheticTokens
from agent.examples.gpt import GPT, add_model_args


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    add_model_args(p)
    p.add_argument("--replicate", type=int, default=1, help="replica groups (HSDP)")
    p.add_argument("--shard", type=int, default=4, help="ranks one replica is sharded over")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds; slows tests down")
    p.add_argument("--out", type=Path, help="write each rank's final local shards here")
    return p.parse_args()


def local_shards(state):
    """A state_dict with every DTensor replaced by this rank's shard of it."""
    if isinstance(state, DTensor):
        return state.to_local()
    if isinstance(state, dict):
        return {key: local_shards(value) for key, value in state.items()}
    if isinstance(state, list):
        return [local_shards(value) for value in state]
    return state


def main() -> None:
    args = parse_args()
    run = agent.attach()
    if args.replicate > 1:
        mesh = run.device_mesh(("replicate", "shard"), (args.replicate, args.shard))
    else:
        mesh = run.device_mesh(("shard",), (args.shard,))
    torch.manual_seed(args.seed)  # the same full weights on every rank, sharded below
    model = GPT(args.vocab, args.seq, args.dim, args.heads, args.layers, args.dropout)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    warmup = max(1, args.steps // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / args.steps)),
    )
    # device_mesh() gave a spare its rank: it builds as the rank it takes over.
    data = SyntheticTokens(args.seed, run.rank, args.batch, args.seq, args.vocab)
    torch.manual_seed(args.seed * 7919 + run.rank)  # dropout differs per rank, reproducibly
    run.register(model=model, optimizer=optimizer, scheduler=scheduler, data=data)

    for step in run.steps(args.steps):
        inputs, targets = data.next_batch()
        loss = model(inputs, targets)
        loss.backward()  # FSDP2 reduce-scatters the gradients
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        run.step()
        if run.rank == 0 and step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save(local_shards(state), args.out / f"rank{run.rank}.pt")


if __name__ == "__main__":
    main()
