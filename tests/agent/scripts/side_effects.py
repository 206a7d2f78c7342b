"""An ordinary DDP script with side effects (knows nothing of the agent): rank 0 prints the loss
and appends to a log every few steps and saves its own checkpoint every few more; every rank
notes the steps at which its model's forward and backward really ran.

torchrun --nproc-per-node 2 side_effects.py --epochs 3 --out out/
"""

import argparse
import json
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

STEP = 0
FORWARDS: list[int] = []
BACKWARDS: list[int] = []


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 1))
        self.body[0].weight.register_hook(self._backward)

    def _backward(self, grad):
        BACKWARDS.append(STEP)
        return grad

    def forward(self, x):
        FORWARDS.append(STEP)
        return self.body(x)


def main():
    global STEP
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    args.out.mkdir(parents=True, exist_ok=True)

    g = torch.Generator().manual_seed(3)
    inputs = torch.randn(256, 8, generator=g)
    dataset = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True).sin())
    sampler = DistributedSampler(dataset, shuffle=True, seed=5)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    torch.manual_seed(0)
    model = DDP(Net())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    torch.manual_seed(100 + rank)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            if rank == 0 and STEP % 3 == 0:
                print(f"step {STEP} loss {loss.item():.6f}", flush=True)
                with open(args.out / "log.txt", "a") as log:
                    log.write(f"{STEP} {loss.item():.6f}\n")
            if rank == 0 and STEP % 6 == 5:
                torch.save(model.module.state_dict(), args.out / f"ckpt_{STEP}.pt")
            STEP += 1
            time.sleep(args.step_sleep)

    state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save(state, args.out / f"rank{rank}.pt")
    calls = {"forward": FORWARDS, "backward": BACKWARDS}
    (args.out / f"calls{rank}.json").write_text(json.dumps(calls))


if __name__ == "__main__":
    main()
