"""A sharded job (FSDP2, 4-way) that loses a rank and its buddy in the same step has no live
copy of the rank's shard left (the buddy held the only mirror of it): every rank rolls back to
the newest sharded checkpoint, the two spares building as the lost ranks and loading their
shards, and the incidents say so (checkpoint.restored, steps_lost > 0). The steps since the
checkpoint are redone with the RNG streams and data positions it holds, so every rank's final
shard is still bit for bit the failure-free run's."""

from __future__ import annotations

import os
import signal

import pytest

from agent.advice import NO_LIVE_COPY
from tests.agent.conftest import (
    FSDP_4,
    FSDP_ARGS,
    FSDP_SCRIPT,
    ROLLED_BACK,
    assert_bit_identical,
    event_types,
    incidents,
)

pytestmark = pytest.mark.agent
EVERY = 4


def test_fsdp_rank_and_buddy_killed_together_roll_back_to_the_sharded_checkpoint(
    start_job, fsdp_baseline, tmp_path
):
    checkpoints = ["--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", str(EVERY)]
    job = start_job(
        "rank-and-buddy", workers=4, spares=2, extra=checkpoints,
        script_args=FSDP_ARGS + FSDP_4 + ["--step-sleep", "0.1"], script=FSDP_SCRIPT,
    )  # fmt: skip
    # Past the checkpoint of step 4 and short of the next one: the rollback loses steps.
    job.wait_step(EVERY + 1)
    job.wait_for(lambda: job.status()["step"] % EVERY in (1, 2), what="a step between checkpoints")
    pids = [job.worker_pid(1), job.worker_pid(2)]  # rank 2 holds the only mirror of rank 1
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    assert job.wait_done() == 0, job.output()

    assert_bit_identical(job.final_states(), fsdp_baseline)
    by_rank = {events[0]["data"]["rank"]: events for events in incidents(job).values()}
    assert sorted(by_rank) == [1, 2]
    # Rank 2's own shard may have moved from its buddy's mirror first (if its death was seen
    # first), in vain: every incident ends in a failed migration and the rollback.
    assert event_types(by_rank[1]) == ROLLED_BACK
    assert by_rank[1][1]["data"]["reason"].startswith(NO_LIVE_COPY)
    assert "rank 2, which mirrors it, failed too" in by_rank[1][1]["data"]["reason"]
    rank2 = event_types(by_rank[2])
    assert rank2 in (ROLLED_BACK, ROLLED_BACK[:1] + ["migration.started"] + ROLLED_BACK[1:])
    restored = [by_rank[r][-2]["data"] for r in (1, 2)]
    checkpoint_step = restored[0]["checkpoint_step"]
    assert checkpoint_step % EVERY == 0 and checkpoint_step >= EVERY
    assert restored[0]["steps_lost"] > 0
    assert restored[0] == {**restored[1], "duration_ms": restored[0]["duration_ms"]}
    assert [by_rank[r][-1]["data"]["step"] for r in (1, 2)] == [checkpoint_step] * 2
    assert f"restoring the checkpoint of step {checkpoint_step}" in job.output()
