"""The YOCO run of bench/goodput.py: agent/examples/gpt.py's job, model-aware, under the agent.

    yoco-agent run --workers 2 --spares 6 -- python bench/yoco_train.py --steps 600 \\
        --progress-dir /tmp/progress

The model, optimizer, schedule, data and seed of agent/examples/gpt.py (built by the same
function as the other systems' scripts), the agent's four lines, and the progress every system's
script publishes (bench/ckpt_restart_train.py's Progress), written by whichever process holds
the rank: a spare that takes a rank over starts writing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import agent  # noqa: E402
from agent.examples.data import SyntheticTokens  # noqa: E402
from bench.ckpt_restart_train import Progress, build, model_args  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    model_args(p)
    args = p.parse_args()

    run = agent.attach()
    model, optimizer, scheduler = build(args)
    # A spare has no rank yet; the data position it receives carries the rank it takes over.
    rank = 0 if run.is_spare else run.rank
    data = SyntheticTokens(args.seed, rank, args.batch, args.seq, args.vocab)
    torch.manual_seed(args.seed * 7919 + rank)
    run.register(model=model, optimizer=optimizer, scheduler=scheduler, data=data)
    progress = None
    for step in run.steps(args.steps):
        inputs, targets = data.next_batch()
        model(inputs, targets).backward()
        if progress is None:  # this process's first step as a rank
            progress = Progress(args.progress_dir, run.rank, step)
        if run.step():
            progress.write(step=step + 1)


if __name__ == "__main__":
    main()
