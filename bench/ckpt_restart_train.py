"""The checkpoint-restart baseline of bench/goodput.py: plain DDP + torch.distributed.checkpoint.

    torchrun --standalone --nproc-per-node 2 --max-restarts 8 bench/ckpt_restart_train.py \\
        --steps 600 --ckpt-dir /tmp/ckpt --ckpt-every 25 --progress-dir /tmp/progress

The same model, optimizer, schedule, data and seed as agent/examples/gpt.py (the YOCO run), in
the usual way: DDP over gloo, a DCP checkpoint every ``--ckpt-every`` steps (0: never, the
failure-free torchrun reference), and on any failure
torchrun restarts every worker, which resume from the newest complete checkpoint (the work since
then is recomputed). Each rank publishes its progress (``progress-dir/rank{r}.json``: pid, the
step it resumed from, steps completed, seconds spent writing checkpoints) for the benchmark.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.examples.data import SyntheticTokens  # noqa: E402
from agent.examples.gpt import GPT, add_model_args  # noqa: E402


def model_args(p: argparse.ArgumentParser) -> None:
    """The model/data options of agent/examples/gpt.py, and where progress goes."""
    add_model_args(p)
    p.add_argument("--progress-dir", type=Path, required=True)


def build(args: argparse.Namespace):
    """Model, optimizer and scheduler exactly as agent/examples/gpt.py builds them."""
    torch.manual_seed(args.seed)
    model = GPT(args.vocab, args.seq, args.dim, args.heads, args.layers, args.dropout)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    warmup = max(1, args.steps // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / args.steps)),
    )
    return model, optimizer, scheduler


class Progress:
    """progress-dir/rank{r}.json, replaced atomically; read by bench/goodput.py. Every system's
    training script publishes the same way: the pid holding the rank, the step it started at,
    steps completed, and the wall-clock time (time.time()) its first step completed."""

    def __init__(self, directory: Path, rank: int, start: int):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"rank{rank}.json"
        self.state = {"pid": os.getpid(), "start": start, "step": start, "ckpt_s": 0.0}
        self.write()

    def write(self, **fields) -> None:
        self.state.update(fields)
        if "first_step_at" not in self.state and self.state["step"] > self.state["start"]:
            self.state["first_step_at"] = time.time()
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.path)


def newest_checkpoint(root: Path) -> int | None:
    steps = [int(p.name[5:]) for p in root.glob("step_*") if (p / "COMPLETE").exists()]
    return max(steps, default=None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    model_args(p)
    p.add_argument("--ckpt-dir", type=Path, required=True)
    p.add_argument("--ckpt-every", type=int, required=True, help="steps; 0: never")
    args = p.parse_args()

    torch.set_num_threads(int(os.environ.get("YOCO_THREADS", "1")))
    # torchrun's store outlives a restart; a fresh key prefix per restart keeps the new workers
    # from reading the dead ones' addresses (which hangs gloo's connect). Fail fast regardless:
    # torchrun retries.
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False,
        timeout=timedelta(seconds=30),
    )  # fmt: skip
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group(
        "gloo",
        store=dist.PrefixStore(f"ckpt_restart/{restart}", store),
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=30),
    )
    model, optimizer, scheduler = build(args)
    ddp = DDP(model)
    data = SyntheticTokens(args.seed, rank, args.batch, args.seq, args.vocab)

    start = newest_checkpoint(args.ckpt_dir) or 0
    if start:
        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=str(args.ckpt_dir / f"step_{start:08d}"))
        set_state_dict(
            model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
        for _ in range(start):
            scheduler.step()
        data.position = start  # one batch per step
    # Dropout RNG per rank (and per resume point: a restart cannot replay the lost stream).
    torch.manual_seed(args.seed * 7919 + rank + 1_000_003 * start)
    progress = Progress(args.progress_dir, rank, start)

    ckpt_s = 0.0
    for step in range(start, args.steps):
        inputs, targets = data.next_batch()
        loss = ddp(inputs, targets)
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        done = step + 1
        if args.ckpt_every and done % args.ckpt_every == 0 and done < args.steps:
            t = time.perf_counter()
            model_sd, optim_sd = get_state_dict(model, optimizer)
            path = args.ckpt_dir / f"step_{done:08d}"
            dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(path))
            dist.barrier()
            if rank == 0:
                (path / "COMPLETE").touch()
                for old in args.ckpt_dir.glob("step_*"):
                    if int(old.name[5:]) < done - args.ckpt_every:
                        shutil.rmtree(old, ignore_errors=True)
            ckpt_s += time.perf_counter() - t
        progress.write(step=done, ckpt_s=ckpt_s)
        if rank == 0 and step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
