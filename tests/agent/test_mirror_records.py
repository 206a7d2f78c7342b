"""The shard mirror keeps exactly the records of completed steps: the last snapshot and the
gradients since, whatever order of completed and abandoned steps came before, although the
buffers records are sent from and received into are used again (agent/mirror_link.py's
BufferPool), whether the records travel through shared memory or over gloo.

A real gloo group of 2 or 3 ranks (one thread each), every rank the buddy of rank - shift;
hypothesis draws which steps complete, the ring, and how records travel (rank 0's memfd may be
unmappable by its buddy, as from another host: rank 0 falls back to gloo, the others keep
shared memory). A barrier between steps stands for the step's all-reduce."""

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


def run_rank(rank: int, ring: tuple[int, int], store, outcomes, link: str, barrier, seen, errors):
    world, shift = ring
    try:
        group = dist.ProcessGroupGloo(store, rank, world, datetime.timedelta(seconds=60))
        mirror = ShardMirror(every=EVERY, shared_memory=link != "gloo")
        mirror.reset(shift=shift)
        if link == "rank 0 on another host" and rank == 0:
            mirror._link.shared_out.host ^= 1  # its buddy cannot map rank 0's memfd
        falls_back = link == "gloo" or (link == "rank 0 on another host" and rank == 0)
        expected = "gloo" if falls_back else "shared memory"
        abort = threading.Event()
        step = 0
        for completes in outcomes:
            snapshot, grads = record_of(rank, step)
            assert mirror.exchange(group, rank, world, step, lambda s=snapshot: s, grads, abort)
            if completes:
                mirror.commit()
                step += 1
            else:
                mirror.drop()
            assert mirror.transport == expected
            barrier.wait()
            held = mirror.copy_held()
            copy = [[g.clone() for g in step_grads] for step_grads in held["grads"]]
            seen.append((step, held["snapshot"]["step"], copy, held["snapshot"]["weight"].clone()))
    except Exception as error:  # noqa: BLE001 - reported by the test's thread
        errors.append(error)
        barrier.abort()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.booleans(), min_size=1, max_size=14).map(lambda o: [True, *o]),
    st.sampled_from([(2, 1), (3, 1), (3, 2)]),
    st.sampled_from(["shared memory", "gloo", "rank 0 on another host"]),
)
def test_the_buddy_holds_the_last_snapshot_and_every_completed_step_since(outcomes, ring, link):
    world, shift = ring
    store = dist.HashStore()
    seen: dict[int, list] = {rank: [] for rank in range(world)}
    errors: list = []
    barrier = threading.Barrier(world)
    threads = [
        threading.Thread(
            target=run_rank,
            args=(rank, ring, store, outcomes, link, barrier, seen[rank], errors),
        )
        for rank in range(world)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    for rank in range(world):
        other = (rank - shift) % world  # whose record this rank holds
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
