"""An FSDP 2 x TP 2 job (agent/examples/llama.py: tensor-parallel projections, FSDP2 over the
shard dimension) survives a SIGKILL: the killed rank's 2-D shards come from its buddy's mirror
(a snapshot plus the gradient shards since, replayed through the optimizer on the spare), and
every rank's final shards are bit for bit the failure-free run's, no completed step lost."""

from __future__ import annotations

import os
import signal

import pytest

from tests.agent.conftest import (
    FSDP_2_TP_2,
    LLAMA_ARGS,
    LLAMA_SCRIPT,
    assert_bit_identical,
    incidents,
)

pytestmark = pytest.mark.agent


def test_fsdp_tp_kill_recovered_from_the_mirror_bit_identical(start_job, llama_tp_baseline):
    job = start_job(
        "killed", workers=4, spares=1,
        script_args=LLAMA_ARGS + FSDP_2_TP_2 + ["--step-sleep", "0.1"], script=LLAMA_SCRIPT,
    )  # fmt: skip
    job.wait_step(11)  # past the snapshot of step 8: the spare replays the steps since
    os.kill(job.worker_pid(1), signal.SIGKILL)
    job.wait_for(lambda: len(job.events("job.resumed")) == 1, what="recovery from SIGKILL")
    assert job.wait_done() == 0, job.output()

    assert_bit_identical(job.final_states(), llama_tp_baseline)
    ((detected, started, completed, resumed),) = incidents(job).values()
    assert detected["data"]["trigger"] == "unplanned"
    assert started["data"]["state_source"] == "mirror"
    assert started["data"]["source"]["rank"] == 2  # rank 1's buddy
    assert completed["data"]["steps_lost"] == 0
    assert completed["data"]["verified"] is True
    assert completed["data"]["resumed_step"] == resumed["data"]["step"]
    (job_started,) = job.events("job.started")
    assert job_started["data"]["parallelism"] == {"dp_shard": 2, "tp": 2}
