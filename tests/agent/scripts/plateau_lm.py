"""A small recurrent language model whose learning rate follows the validation loss
(ReduceLROnPlateau, as in the PyTorch word_language_model example, which divides the LR when the
validation loss stops improving), trained with Adam, gradient clipping and a DataLoader over
fixed-length windows of a token stream with a DistributedSampler.

torchrun --nproc-per-node 2 plateau_lm.py --epochs 3 --out out/
"""

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.GRU(ninp, nhid, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input):
        emb = self.drop(self.encoder(input))
        output, _ = self.rnn(emb)
        return self.decoder(self.drop(output))


def batchify(stream, bptt):
    windows = stream[: len(stream) // (bptt + 1) * (bptt + 1)].view(-1, bptt + 1)
    return TensorDataset(windows[:, :-1], windows[:, 1:])


def evaluate(model, data_loader, criterion, ntokens):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for data, targets in data_loader:
            output = model(data)
            total += criterion(output.view(-1, ntokens), targets.reshape(-1)).item()
    return total / len(data_loader)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--eval-interval", type=int, default=4)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    torch.manual_seed(1111)

    ntokens = 32
    g = torch.Generator().manual_seed(3)
    stream = (torch.arange(3000) * 5 + torch.randint(0, 3, (3000,), generator=g)) % ntokens
    train_data = batchify(stream[:2000], 12)
    val_data = batchify(stream[2000:2400], 12)
    train_sampler = DistributedSampler(train_data, seed=1111)
    train_loader = DataLoader(train_data, batch_size=8, sampler=train_sampler)
    val_loader = DataLoader(val_data, batch_size=16)

    model = RNNModel(ntokens, 16, 32)
    model = DDP(model)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=0.5, patience=0, threshold=0.02
    )
    torch.manual_seed(1111 + rank)  # dropout differs between ranks

    step = 0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        for data, targets in train_loader:
            model.train()
            output = model(data)
            loss = criterion(output.view(-1, ntokens), targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            step += 1
            if step % args.eval_interval == 0:
                val_loss = evaluate(model, val_loader, criterion, ntokens)
                scheduler.step(val_loss)
                if rank == 0:
                    lr = optimizer.param_groups[0]["lr"]
                    print(f"step {step} val loss {val_loss:.4f} lr {lr:g}", flush=True)
            time.sleep(args.step_sleep)

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        state = {
            "model": model.module.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
        }
        torch.save(state, args.out / f"rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
