"""An HSDP job (2 replicas x 2 shards) survives a SIGKILL: the killed rank's shard comes from
its replica in the other replica group (`state_source: replica`), and every rank's final shard
is bit for bit the failure-free run's, no completed step lost."""

from __future__ import annotations

import os
import signal

import pytest

from tests.agent.conftest import FSDP_ARGS, FSDP_SCRIPT, assert_bit_identical, incidents

pytestmark = pytest.mark.agent
HSDP_2x2 = ["--replicate", "2", "--shard", "2"]


def test_hsdp_kill_recovered_from_the_replica_bit_identical(start_job):
    baseline = start_job(
        "baseline", workers=4, script_args=FSDP_ARGS + HSDP_2x2, script=FSDP_SCRIPT
    )
    assert baseline.wait_done() == 0, baseline.output()
    job = start_job(
        "killed", workers=4, spares=1, script_args=FSDP_ARGS + HSDP_2x2 + ["--step-sleep", "0.1"],
        script=FSDP_SCRIPT,
    )  # fmt: skip
    job.wait_step(6)
    os.kill(job.worker_pid(1), signal.SIGKILL)
    job.wait_for(lambda: len(job.events("job.resumed")) == 1, what="recovery from SIGKILL")
    assert job.wait_done() == 0, job.output()

    assert_bit_identical(job.final_states(), baseline.final_states())
    ((_, started, completed, _),) = incidents(job).values()
    assert started["data"]["state_source"] == "replica"
    assert started["data"]["source"]["rank"] == 3  # the same shard in the other replica group
    assert completed["data"]["steps_lost"] == 0
    assert completed["data"]["verified"] is True
    (job_started,) = job.events("job.started")
    assert job_started["data"]["parallelism"] == {"dp_replicate": 2, "dp_shard": 2}
