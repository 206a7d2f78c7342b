"""agent/examples/llama.py trains under the agent with gloo on 4 ranks, for each mesh the
sharded-job tests use (FSDP 4, HSDP 2 x 2, FSDP 2 x TP 2): its loss goes down; and a second run
with the same seed ends with every rank's local shards bit for bit the same (the migration
tests compare a recovered run with a failure-free one the same way)."""

from __future__ import annotations

import math
import re

import pytest

from tests.agent.conftest import (
    FSDP_2_TP_2,
    LLAMA_ARGS,
    LLAMA_SCRIPT,
    assert_bit_identical,
)

pytestmark = pytest.mark.agent

MESHES = {
    "fsdp": ["--shard", "4"],
    "hsdp": ["--replicate", "2", "--shard", "2"],
}


def train(start_job, mesh: list[str]) -> tuple[list[float], list[dict]]:
    """Rank 0's loss at each step and every rank's final local state."""
    job = start_job("run", script_args=LLAMA_ARGS + mesh + ["--log-every", "1"],
                    script=LLAMA_SCRIPT)  # fmt: skip
    assert job.wait_done() == 0, job.output()
    log = job.log_path.read_text()
    losses = [float(x) for x in re.findall(r"^step \d+ loss (\S+)$", log, re.M)]
    assert len(losses) == 16 and all(math.isfinite(x) for x in losses), losses
    return losses, job.final_states()


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_llama_trains_under_each_mesh(start_job, mesh):
    losses, _ = train(start_job, mesh)
    assert losses[-1] < losses[0], losses


def test_fsdp_tp_trains_and_a_second_run_ends_bit_identical(start_job, llama_tp_baseline):
    """FSDP 2 x TP 2, the mesh with the most collectives per step; the other run is the
    session's failure-free one, which the TP kill test shares (each launch costs seconds)."""
    losses, states = train(start_job, FSDP_2_TP_2)
    assert losses[-1] < losses[0], losses
    assert_bit_identical(states, llama_tp_baseline)
