"""A regression MLP trained with AdamW and a cosine schedule, keeping an exponential moving
average of its weights with torch.optim.swa_utils.AveragedModel (the EMA the final model is
evaluated with, as torchvision's --model-ema and timm's ModelEma do).

Ported to the agent's model-aware mode: `diff ema.py ema_yoco.py` is the port.

yoco-agent run --workers 2 --spares 1 -- python ema_yoco.py --epochs 3 --out out/
"""

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import agent


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--ema-decay", type=float, default=0.9)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    run = agent.attach()
    rank = 0 if run.is_spare else run.rank  # a spare receives its rank's RNG and data position

    g = torch.Generator().manual_seed(0)
    inputs = torch.randn(320, 12, generator=g)
    targets = torch.sin(inputs @ torch.randn(12, 3, generator=g))
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset, run.world_size, rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler, drop_last=True)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 48), nn.SiLU(), nn.Dropout(0.1), nn.Linear(48, 3))
    ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(args.ema_decay))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    total_steps = args.epochs * len(loader)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)
    torch.manual_seed(100 + rank)
    run.register(model, optimizer, scheduler, data=loader, extras={"ema": ema_model})

    model.train()
    for step in run.steps(total_steps):
        x, y = run.next_batch()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        if run.step():  # False: abandoned (a peer failed), and yielded again
            ema_model.update_parameters(model)
        time.sleep(args.step_sleep)
        if run.rank == 0 and (step + 1) % len(loader) == 0:
            print(f"epoch {step // len(loader)} loss {loss.item():.4f}", flush=True)

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "ema": ema_model.state_dict(),
        }
        torch.save(state, args.out / f"rank{run.rank}.pt")


if __name__ == "__main__":
    main()
