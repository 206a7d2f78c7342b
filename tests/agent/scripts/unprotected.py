"""An ordinary DDP script holding state the agent cannot capture: a running-loss tracker with a
tensor and a counter but no state_dict, and a generator of batches."""

import argparse
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class RunningLoss:
    def __init__(self):
        self.total = torch.zeros(())
        self.count = 0

    def update(self, loss):
        self.total += loss.detach()
        self.count += 1


def batches(seed):
    g = torch.Generator().manual_seed(seed)
    while True:
        x = torch.randn(8, 4, generator=g)
        yield x, x.sum(dim=1, keepdim=True)


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--out", type=Path, required=True)
args = parser.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
tracker = RunningLoss()
data = batches(dist.get_rank())
for _ in range(args.steps):
    x, y = next(data)
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    tracker.update(loss)
args.out.mkdir(parents=True, exist_ok=True)
torch.save({"model": model.module.state_dict()}, args.out / f"rank{dist.get_rank()}.pt")
