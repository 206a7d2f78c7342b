"""A DDP script whose control flow depends on the model's values: it skips the backward and the
update of a step whose predictions are all equal. A spare catching up (whose model calls answer with
zeros) never reaches a step boundary; the agent must say so, not wait or report success.

torchrun --nproc-per-node 2 loss_gated.py --steps 30 --out out/
"""

import argparse
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--step-sleep", type=float, default=0.0)
parser.add_argument("--out", type=Path, required=True)
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
torch.manual_seed(10 + rank)
for _ in range(args.steps):
    x = torch.randn(16, 8)
    prediction = model(x)
    loss = nn.functional.mse_loss(prediction, x[:, :1].sin())
    if prediction.std().item() > 0:
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    time.sleep(args.step_sleep)

args.out.mkdir(parents=True, exist_ok=True)
torch.save({"model": model.module.state_dict()}, args.out / f"rank{rank}.pt")
