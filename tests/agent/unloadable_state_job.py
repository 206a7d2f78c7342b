"""A model-aware job whose state cannot be loaded once it passes a step: an object registered
as an extra refuses, deterministically, any state counted past `--refuse-from`, except counts
that are multiples of `--loadable-every` (its checkpoints, taken every that many steps).
Used to show that a receive failure that repeats does not burn the spare pool
(tests/agent/test_receive_failure.py)."""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

import agent
from agent.examples.data import SyntheticRegression


class StepCounter:
    def __init__(self, refuse_from: int, loadable_every: int):
        self.count = 0
        self.refuse_from = refuse_from
        self.loadable_every = loadable_every

    def state_dict(self) -> dict:
        return {"count": self.count}

    def load_state_dict(self, state: dict) -> None:
        checkpointed = self.loadable_every and state["count"] % self.loadable_every == 0
        if state["count"] >= self.refuse_from and not checkpointed:
            raise ValueError(f"a count of {state['count']} is past what this object can load")
        self.count = state["count"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--refuse-from", type=int, default=12)
    p.add_argument("--loadable-every", type=int, default=0, help="0: no exception")
    p.add_argument("--step-sleep", type=float, default=0.1)
    p.add_argument("--out")
    args = p.parse_args()
    run = agent.attach()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = SyntheticRegression(0, 0 if run.is_spare else run.rank, 16, 8)
    counter = StepCounter(args.refuse_from, args.loadable_every)
    run.register(model=model, optimizer=optimizer, data=data, extras={"counter": counter})
    for _ in run.steps(args.steps):
        x, y = data.next_batch()
        nn.functional.mse_loss(model(x), y).backward()
        run.step()
        counter.count += 1
        time.sleep(args.step_sleep)


if __name__ == "__main__":
    main()
