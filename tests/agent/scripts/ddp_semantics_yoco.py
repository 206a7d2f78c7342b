"""Model-aware: what a DDP script relies on (tests/agent/test_ddp_semantics.py). Each rank seeds
1337 + rank before building its model (nanoGPT does), accumulates two backward passes (the
first inside run.accumulate(), DDP's no_sync), and records what it sees after backward."""

import argparse
from pathlib import Path

import torch
from torch import nn

import agent

parser = argparse.ArgumentParser()
parser.add_argument("--out", type=Path, required=True)
args = parser.parse_args()

run = agent.attach()
torch.manual_seed(1337 + (0 if run.is_spare else run.rank))
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
run.register(model=model, optimizer=optimizer)

records = []
for step in run.steps(2):
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.arange(12.0).view(3, 4) * (run.rank + 1) + step
    with run.accumulate():
        model(x).sum().backward()
    model(x).square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    clipped = [p.grad.clone() for p in model.parameters()]
    run.step()
    records.append({"x": x, "weights": weights, "grads": grads, "norm": norm, "clipped": clipped})

args.out.mkdir(parents=True, exist_ok=True)
torch.save(records, args.out / f"rank{run.rank}.pt")
