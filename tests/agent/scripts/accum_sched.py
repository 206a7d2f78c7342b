"""An ordinary DDP training script (knows nothing of the agent): gradient accumulation with
no_sync, AdamW with a warm-up + cosine LR schedule, a shuffled DataLoader.

torchrun --nproc-per-node 2 accum_sched.py --epochs 4 --out out/
"""

import argparse
import contextlib
import math
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATE = 3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()

    torch.manual_seed(0)
    teacher = torch.randn(16, 4)
    inputs = torch.randn(288, 16)
    dataset = TensorDataset(inputs, torch.tanh(inputs @ teacher))
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 4))
    ddp = DDP(model)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=3e-3, weight_decay=0.01)
    steps = args.epochs * len(dataset) // (8 * ACCUMULATE)
    warmup = 4

    def schedule(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    torch.manual_seed(7 + rank)  # each rank shuffles differently
    loader = DataLoader(dataset, batch_size=8, shuffle=True)

    for epoch in range(args.epochs):
        for i, (x, y) in enumerate(loader):
            last = (i + 1) % ACCUMULATE == 0
            with contextlib.nullcontext() if last else ddp.no_sync():
                loss = F.mse_loss(ddp(x), y) / ACCUMULATE
                loss.backward()
            if last:
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                time.sleep(args.step_sleep)
        if rank == 0:
            print(f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.5f}", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save(state, args.out / f"rank{rank}.pt")


if __name__ == "__main__":
    main()
