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
    "fsdp_tp": FSDP_2_TP_2,
}


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_llama_trains_under_each_mesh(start_job, mesh):
    job = start_job("run", script_args=LLAMA_ARGS + mesh + ["--log-every", "1"],
                    script=LLAMA_SCRIPT)  # fmt: skip
    assert job.wait_done() == 0, job.output()
    log = job.log_path.read_text()
    losses = [float(x) for x in re.findall(r"^step \d+ loss (\S+)$", log, re.M)]
    assert len(losses) == 16 and all(math.isfinite(x) for x in losses), losses
    assert losses[-1] < losses[0], losses


def test_two_runs_end_bit_identical(start_job, llama_tp_baseline):
    """Shown on FSDP 2 x TP 2, the mesh with the most collectives per step; the first run is
    the session's failure-free run, which the TP kill test shares."""
    job = start_job("second", script_args=LLAMA_ARGS + FSDP_2_TP_2, script=LLAMA_SCRIPT)
    assert job.wait_done() == 0, job.output()
    assert_bit_identical(job.final_states(), llama_tp_baseline)
