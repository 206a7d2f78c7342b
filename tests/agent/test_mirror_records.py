"""The shard mirror keeps exactly the records of completed steps: the last snapshot and the
gradients since, whatever order of completed and abandoned steps came before, although the
buffers records are sent from and received into are used again (agent/mirror_link.py's
BufferPool), whether the records travel through shared memory or over gloo.

Two ranks of a real gloo group (one thread each), each the other's buddy; hypothesis draws
which steps complete, and how records travel (one rank's memfd may be unmappable by its buddy,
as from another host: that rank falls back to gloo, the other keeps shared memory). A barrier
between steps stands for the step's all-reduce."""

from __future__ import annotations

import datetime
import threading

import torch
import torch.distributed as dist
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.mirror import ShardMirror

EVERY = 3


def record_of(rank: int, step: int) -> tuple[dict, list[torch.Tensor]]:
    """What `rank` sends at `step`: values no other rank or step sends. The gradients are large
    enough that a record fills a buffer of its own size every step."""
    base = float(rank * 1000 + step)
    snapshot = {
        "step": step,
        "weight": torch.full((40_000,), base),
        "moment": torch.full((3,), -base),
    }
    grads = [torch.full((20_000,), base + 0.5), torch.arange(7, dtype=torch.float64) + base]
    return snapshot, grads


def run_rank(rank: int, store, outcomes, link: str, barrier, seen: list, errors: list) -> None:
    try:
        group = dist.ProcessGroupGloo(store, rank, 2, datetime.timedelta(seconds=60))
        mirror = ShardMirror(every=EVERY, shared_memory=link != "gloo")
        if link == "rank 0 on another host" and rank == 0:
            mirror._link.shared_out.host ^= 1  # rank 1 cannot map rank 0's memfd
        falls_back = link == "gloo" or (link == "rank 0 on another host" and rank == 0)
        expected = "gloo" if falls_back else "shared memory"
        mirror.reset(shift=1)
        abort = threading.Event()
        step = 0
        for completes in outcomes:
            snapshot, grads = record_of(rank, step)
            assert mirror.exchange(group, rank, 2, step, lambda s=snapshot: s, grads, abort)
            if completes:
                mirror.commit()
                step += 1
            else:
                mirror.drop()
            assert mirror.transport == expected
            barrier.wait()
            held = mirror.copy_held()
            seen.append(
                (
                    step,
                    held["snapshot"]["step"],
                    [[g.clone() for g in step_grads] for step_grads in held["grads"]],
                    held["snapshot"]["weight"].clone(),
                )
            )
    except Exception as error:  # noqa: BLE001 - reported by the test's thread
        errors.append(error)


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.booleans(), min_size=1, max_size=14).map(lambda o: [True, *o]),
    st.sampled_from(["shared memory", "gloo", "rank 0 on another host"]),
)
def test_the_buddy_holds_the_last_snapshot_and_every_completed_step_since(outcomes, link):
    store = dist.HashStore()
    seen: dict[int, list] = {0: [], 1: []}
    errors: list = []
    barrier = threading.Barrier(2)
    threads = [
        threading.Thread(
            target=run_rank, args=(rank, store, outcomes, link, barrier, seen[rank], errors)
        )
        for rank in (0, 1)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    for rank, other in ((0, 1), (1, 0)):
        assert len(seen[rank]) == len(outcomes)
        for completed, snapshot_step, grads, weight in seen[rank]:
            # Snapshots are sent at the first step and every EVERY-th after: the newest completed.
            expected_snapshot = ((completed - 1) // EVERY) * EVERY
            assert snapshot_step == expected_snapshot
            assert torch.equal(weight, record_of(other, expected_snapshot)[0]["weight"])
            assert len(grads) == completed - expected_snapshot
            for offset, step_grads in enumerate(grads):
                expected = record_of(other, expected_snapshot + offset)[1]
                assert all(torch.equal(a, b) for a, b in zip(step_grads, expected, strict=True))
