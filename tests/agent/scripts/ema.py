"""A regression MLP trained with AdamW and a cosine schedule, keeping an exponential moving
average of its weights with torch.optim.swa_utils.AveragedModel (the EMA the final model is
evaluated with, as torchvision's --model-ema and timm's ModelEma do).

torchrun --nproc-per-node 2 ema.py --epochs 3 --out out/
"""

import argparse
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--ema-decay", type=float, default=0.9)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()

    g = torch.Generator().manual_seed(0)
    inputs = torch.randn(320, 12, generator=g)
    targets = torch.sin(inputs @ torch.randn(12, 3, generator=g))
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler, drop_last=True)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 48), nn.SiLU(), nn.Dropout(0.1), nn.Linear(48, 3))
    model = DDP(model)
    ema_model = AveragedModel(model.module, multi_avg_fn=get_ema_multi_avg_fn(args.ema_decay))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    total_steps = args.epochs * len(loader)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)
    torch.manual_seed(100 + rank)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            ema_model.update_parameters(model.module)
            time.sleep(args.step_sleep)
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        state = {
            "model": model.module.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "ema": ema_model.state_dict(),
        }
        torch.save(state, args.out / f"rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
