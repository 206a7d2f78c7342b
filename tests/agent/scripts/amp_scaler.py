"""An ordinary DDP training script (knows nothing of the agent): CPU bfloat16 autocast,
GradScaler, gradient clipping, synthetic data drawn from the global RNG.

torchrun --nproc-per-node 2 amp_scaler.py --steps 40 --out out/
"""

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 48), nn.SiLU(), nn.LayerNorm(48))
        self.head = nn.Linear(48, 1)

    def forward(self, x):
        return self.head(self.body(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    dist.init_process_group(backend="gloo")
    rank = int(os.environ["RANK"])

    torch.manual_seed(0)
    model = Net()
    ddp = DDP(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12, growth_interval=5)
    torch.manual_seed(42 + rank)

    for step in range(args.steps):
        x = torch.randn(32, 12)
        y = x[:, :1] * 2 - x[:, 1:2]
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.mse_loss(ddp(x).float(), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        time.sleep(args.step_sleep)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f} scale {scaler.get_scale()}", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
    }
    torch.save(state, args.out / f"rank{rank}.pt")


if __name__ == "__main__":
    main()
