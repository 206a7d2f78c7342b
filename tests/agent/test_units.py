"""The pieces that need no processes: events, the mirror encoding, state skeletons, policy."""

from __future__ import annotations

import datetime as dt

import pytest
import torch

from agent.events import EventFactory
from agent.policy import Thresholds, evaluate
from agent.reducer import SlotOverflow, decode_slot, encode_slot
from agent.skeleton import flatten, unflatten
from agent.state import checksum

pytestmark = pytest.mark.agent


def test_events_follow_spec_3():
    factory = EventFactory("c1", "j1")
    event = factory.migration_completed(
        "inc-1", steps_lost=0, duration_ms=12.7, nbytes=10, recompute_ms=3.2, resumed_step=5
    )
    assert event["specversion"] == "1.0"
    assert event["source"] == "/clusters/c1/jobs/j1"
    assert event["subject"] == "inc-1"
    assert dt.datetime.fromisoformat(event["time"]).utcoffset() is not None
    assert event["data"] == {
        "steps_lost": 0, "duration_ms": 13, "bytes": 10, "recompute_ms": 3, "resumed_step": 5
    }  # fmt: skip
    verified = factory.migration_completed(
        "inc-1", steps_lost=0, duration_ms=1, nbytes=1, recompute_ms=0, resumed_step=5,
        verified=True,
    )  # fmt: skip
    assert verified["data"]["verified"] is True
    with pytest.raises(ValueError):
        factory.failure_detected(
            "inc-1", trigger="oops", category="gpu_xid", rank=0, node="n", device="d",
            step=0, xid=None, detail="",
        )  # fmt: skip
    with pytest.raises(ValueError):
        factory._event("job.resumed", {})  # an incident event without its subject


def test_job_started_and_migration_started_carry_spec_3_fields():
    factory = EventFactory("c1", "j1")
    started = factory.job_started(4, "gpt", 0, spares=2, parallelism={"dp_replicate": 4})
    assert started["data"]["spares"] == 2
    assert started["data"]["parallelism"] == {"dp_replicate": 4}
    migration = factory.migration_started(
        "inc-1", state_source="self", source={"node": "n", "rank": 1}, target={"node": "m"},
        nbytes=10,
    )  # fmt: skip
    assert migration["data"]["spare"] == "standby"
    with pytest.raises(ValueError):
        factory.migration_started(
            "inc-1", state_source="self", source={}, target={}, nbytes=1, spare="borrowed"
        )


@pytest.mark.parametrize("blob", [b"", b"x", bytes(range(256)) * 40])
def test_mirror_slot_round_trips_exactly_through_a_float_sum(blob):
    slot = encode_slot(blob, 8000)
    assert decode_slot(slot + torch.zeros_like(slot)) == blob
    with pytest.raises(SlotOverflow):
        encode_slot(blob + b"y" * 30000, 8000)


def test_skeleton_and_tensors_rebuild_the_state():
    state = {"a": torch.arange(4.0), "b": [1, (torch.ones(2, 2), "x")], "c": {"d": 3}}
    skeleton, tensors = flatten(state)
    assert len(tensors) == 2
    rebuilt = unflatten(skeleton, tensors)
    assert torch.equal(rebuilt["a"], state["a"]) and rebuilt["b"][1][1] == "x"


def test_checksum_sees_a_moved_block():
    t = torch.arange(1024, dtype=torch.int64)
    moved = t.clone().view(16, 64).flip(0).flatten()
    assert checksum(t)[0] == checksum(moved)[0]  # same words...
    assert checksum(t)[1] != checksum(moved)[1]  # ...in another order


def test_policy_thresholds():
    limits = Thresholds()
    assert [a.category for a in evaluate({"temperature_c": 95}, {}, limits)] == ["gpu_thermal"]
    (fatal,) = evaluate({"xid": 79}, {}, limits)
    assert fatal.fatal and fatal.xid == 79
    assert evaluate({"ecc_correctable": 150}, {"ecc_correctable": 100}, limits) == []
    assert evaluate({"temperature_c": 60, "host_memory_available_mb": 9000}, {}, limits) == []
