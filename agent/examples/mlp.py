"""A small MLP regressing a random teacher, trained under the YOCO agent.

yoco-agent run --workers 2 --spares 1 -- python agent/examples/mlp.py --steps 500
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn

import agent
from agent.examples.data import SyntheticRegression


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--out", type=Path)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    run = agent.attach()
    torch.manual_seed(args.seed)
    widths = [args.features] + [args.hidden] * args.layers
    layers: list[nn.Module] = []
    for a, b in zip(widths, widths[1:], strict=False):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(widths[-1], 1)).to(run.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=max(1, args.steps // 3))
    # A spare builds its data as rank 0; taking a rank over, it receives that rank's position.
    data = SyntheticRegression(
        args.seed, 0 if run.is_spare else run.rank, args.batch, args.features
    )
    run.register(model=model, optimizer=optimizer, scheduler=scheduler, data=data)

    for step in run.steps(args.steps):
        x, y = data.next_batch()
        loss = nn.functional.mse_loss(model(x.to(run.device)), y.to(run.device))
        loss.backward()
        run.step()
        if run.rank == 0 and step % 50 == 0:
            print(f"step {step} loss {loss.item():.5f}", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save(state, args.out / f"rank{run.rank}.pt")


if __name__ == "__main__":
    main()
