"""An ordinary data-parallel script without DDP (knows nothing of the agent): it averages the
gradients itself with dist.all_reduce, as in the PyTorch distributed tutorial; AdamW, a
per-rank data stream from a seeded generator.

torchrun --nproc-per-node 2 manual_allreduce.py --steps 40 --out out/
"""

import argparse
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn


def average_gradients(model: nn.Module) -> None:
    world_size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= world_size


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 48), nn.Tanh(), nn.Dropout(0.1), nn.Linear(48, 3))
    for param in model.parameters():  # every rank starts from rank 0's weights
        dist.broadcast(param.data, src=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    torch.manual_seed(50 + rank)

    for _ in range(args.steps):
        x = torch.randn(16, 12)
        y = x[:, :3].cos()
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        average_gradients(model)
        optimizer.step()
        time.sleep(args.step_sleep)

    args.out.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save(state, args.out / f"rank{rank}.pt")


if __name__ == "__main__":
    main()
