"""agent/examples/llama.py trains under plain torchrun with gloo on 4 ranks, for each mesh the
sharded-job tests use (FSDP 4, HSDP 2 x 2, FSDP 2 x TP 2): its loss goes down; and a second run
with the same seed ends with every rank's local shards bit for bit the same (the migration
tests compare a recovered run with a failure-free one the same way)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.job import REPO, state_differences

pytestmark = pytest.mark.agent

# A model small enough for 4 processes on 2 CPU cores; 4 query heads over 2 key/value heads so
# that both split over 2 tensor-parallel ranks.
LLAMA_ARGS = ["--steps", "5", "--dim", "32", "--heads", "4", "--kv-heads", "2", "--layers", "2",
              "--seq", "16", "--batch", "4", "--vocab", "64", "--seed", "7",
              "--log-every", "1"]  # fmt: skip
MESHES = {
    "fsdp": ["--shard", "4"],
    "hsdp": ["--replicate", "2", "--shard", "2"],
    "fsdp_tp": ["--shard", "2", "--tp", "2"],
}


def train(out: Path, mesh: list[str]) -> tuple[list[float], list[dict]]:
    """Rank 0's loss at each step and every rank's final local state."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
        str(REPO / "agent/examples/llama.py"), *LLAMA_ARGS, *mesh, "--out", str(out),
    ]  # fmt: skip
    # One thread per rank (torchrun's default, made explicit): CPU kernels split work, and so
    # round, the same way in both runs.
    result = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    losses = [float(x) for x in re.findall(r"^step \d+ loss (\S+)$", result.stdout, re.M)]
    states = [torch.load(out / f"rank{rank}.pt", weights_only=False) for rank in range(4)]
    return losses, states


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_llama_trains_under_each_mesh(tmp_path, mesh):
    losses, _ = train(tmp_path / "run", mesh)
    assert len(losses) == 5 and all(math.isfinite(x) for x in losses), losses
    assert losses[-1] < losses[0], losses


def test_two_runs_end_bit_identical(tmp_path):
    """Shown on FSDP 2 x TP 2, the mesh with the most collectives per step (each launch costs
    the suite ~15 s of start-up, so not on every mesh)."""
    _, first = train(tmp_path / "first", MESHES["fsdp_tp"])
    _, second = train(tmp_path / "second", MESHES["fsdp_tp"])
    assert not (differences := state_differences(second, first)), differences
