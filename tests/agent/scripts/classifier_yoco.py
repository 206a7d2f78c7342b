"""A torchvision-style image classifier (references/classification/train.py, shrunk): a small CNN
with BatchNorm, SGD with Nesterov momentum and weight decay, MultiStepLR stepped per epoch,
DistributedSampler, and a DataLoader with two worker processes whose NumPy augmentation is
seeded per worker from torch's worker seed (worker_init_fn, as the PyTorch reproducibility
notes, torchvision and timm do).

Ported to the agent's model-aware mode: `diff classifier.py classifier_yoco.py` is the port.

yoco-agent run --workers 2 --spares 1 -- python classifier_yoco.py --epochs 4 --out out/
"""

import argparse
import random
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

import agent


class SyntheticImages(Dataset):
    """CIFAR-like, made up: 3x10x10 images of two overlaid stripe patterns; the label is which."""

    def __init__(self, size: int):
        g = torch.Generator().manual_seed(0)
        self.labels = torch.randint(0, 4, (size,), generator=g)
        rows = torch.arange(10).float()
        base = torch.stack([torch.sin(rows * (k + 1)) for k in range(4)])
        self.images = base[self.labels][:, None, :, None] + 0.3 * torch.randn(
            size, 3, 10, 10, generator=g
        )

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        image = self.images[index].numpy()
        # RandomCrop(8) and RandomHorizontalFlip, with NumPy's RNG
        top, left = np.random.randint(0, 3, size=2)
        image = image[:, top : top + 8, left : left + 8]
        if np.random.rand() < 0.5:
            image = image[:, :, ::-1]
        return torch.from_numpy(image.copy()), self.labels[index]


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(inplace=True),
        nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 4),
    )


def train_one_step(model, criterion, run, i, epoch, args):
    model.train()
    image, target = run.next_batch()
    output = model(image)
    loss = criterion(output, target)
    loss.backward()
    stepped = run.step()  # False: abandoned (a peer failed), and yielded again
    if i % 10 == 0 and run.rank == 0:
        print(f"Epoch: [{epoch}] [{i}] loss {loss.item():.4f}", flush=True)
    time.sleep(args.step_sleep)
    return stepped


def main(args):
    run = agent.attach()
    torch.manual_seed(args.seed)

    dataset = SyntheticImages(256)
    rank = 0 if run.is_spare else run.rank  # a spare receives its rank's sampler position
    train_sampler = DistributedSampler(dataset, run.world_size, rank, seed=args.seed)
    g = torch.Generator()
    g.manual_seed(args.seed)
    data_loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        sampler=train_sampler,
        num_workers=args.workers,
        worker_init_fn=seed_worker,
        generator=g,
    )

    model = make_model()
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4
    )
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.1)
    model_without_ddp = model
    run.register(model, optimizer, data=data_loader, extras={"lr_scheduler": lr_scheduler})

    steps_per_epoch = len(data_loader)
    for step in run.steps(args.epochs * steps_per_epoch):
        epoch, i = divmod(step, steps_per_epoch)
        stepped = train_one_step(model, criterion, run, i, epoch, args)
        if stepped and i == steps_per_epoch - 1:
            lr_scheduler.step()

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        checkpoint = {
            "model": model_without_ddp.state_dict(),
            "optimizer": optimizer.state_dict(),
            "lr_scheduler": lr_scheduler.state_dict(),
        }
        torch.save(checkpoint, args.out / f"rank{run.rank}.pt")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="PyTorch Classification Training")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--out", type=Path)
    main(parser.parse_args())
