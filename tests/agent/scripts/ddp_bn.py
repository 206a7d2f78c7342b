"""An ordinary DDP training script (knows nothing of the agent): DataLoader + DistributedSampler,
a BatchNorm + dropout model, SGD with momentum.

torchrun --nproc-per-node 2 ddp_bn.py --epochs 5 --out out/
"""

import argparse
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world_size = dist.get_world_size()

    g = torch.Generator().manual_seed(1)
    inputs = torch.randn(256, 8, generator=g)
    targets = (inputs.sum(dim=1, keepdim=True) > 0).float()
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1)
    )
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.BCEWithLogitsLoss()
    torch.manual_seed(1000 + rank)  # different dropout masks on every rank

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            time.sleep(args.step_sleep)
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save(state, args.out / f"rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
