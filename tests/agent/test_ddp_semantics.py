"""Model-aware mode keeps what a DDP script relies on: every rank starts from rank 0's weights
whatever it seeded, gradients are averaged over the ranks by the time backward() returns (so
clipping after backward sees, and changes, the averaged gradient), and backward passes inside
run.accumulate() (DDP's no_sync) add up locally and are reduced once."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.agent.transparent_job import TransparentJob

pytestmark = pytest.mark.agent


def local_gradients(weights: dict, x: torch.Tensor) -> list[torch.Tensor]:
    model = nn.Linear(4, 2)
    model.load_state_dict(weights)
    model(x).sum().backward()
    model(x).square().sum().backward()
    return [p.grad for p in model.parameters()]


def test_rank0_weights_reduced_gradients_after_backward_and_no_sync(tmp_path):
    job = TransparentJob(tmp_path, "ddp_semantics_yoco.py", 2, 0, [], transparent=False)
    try:
        assert job.wait_done() == 0, job.output()
        ranks = job.final_states()
    finally:
        job.stop()

    torch.manual_seed(1337)
    rank0_init = nn.Linear(4, 2).state_dict()
    for name, tensor in rank0_init.items():  # rank 1 seeded 1338 and starts from rank 0's
        assert torch.equal(ranks[1][0]["weights"][name], tensor), name
    for step in range(2):
        seen = [records[step] for records in ranks]
        for name in rank0_init:
            assert torch.equal(seen[0]["weights"][name], seen[1]["weights"][name])
        local = [local_gradients(r["weights"], r["x"]) for r in seen]
        mean = [(a + b) / 2 for a, b in zip(*local, strict=True)]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in mean]))
        for record in seen:
            for got, want in zip(record["grads"], mean, strict=True):
                torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(record["norm"], norm, rtol=1e-6, atol=1e-6)
            for got, want in zip(record["clipped"], mean, strict=True):
                torch.testing.assert_close(got, want * (0.5 / (norm + 1e-6)), rtol=1e-5, atol=1e-6)
