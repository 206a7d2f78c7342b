"""Periodic checkpoints with torch.distributed.checkpoint: the fallback when no live copy of the
state exists or no spare is left (SPEC 2.3). Restoring one is a rollback and is reported as one.

Layout, one directory per step:

    step_00000040/replicated/   model, optimizer, scheduler, extras (written by rank 0)
    step_00000040/shard_3/      a sharded job's (FSDP2): that rank's shards of them, instead
    step_00000040/rank_3/       that rank's RNG streams and data position
    step_00000040/COMPLETE      written by rank 0 once every rank has written its part

A sharded job's state is what a spare taking a rank receives (`Registry.transfer_state`): every
rank writes its own local shards and loads them back onto its own mesh, so a checkpoint restores
at the world size and mesh shape it was written at (no resharding).

Each part is a DCP checkpoint of tensors only (the state's typed skeleton, agent/skeleton.py,
is stored as a uint8 tensor beside them), so it loads without a pre-built template, e.g. into a
freshly started process.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from agent.skeleton import flatten, unflatten

SKELETON_KEY = "skeleton"


def step_dir(root: Path, step: int) -> Path:
    return Path(root) / f"step_{step:08d}"


def _save(obj, path: Path) -> None:
    # Imported here, not at the top: on a bare torch it pulls in DTensor and sympy (about a
    # second of CPU), which the coordinator, which never checkpoints, paid at start-up. (A
    # training process loads most of it anyway, with torch._dynamo, at its first optimizer.)
    import torch.distributed.checkpoint as dcp

    skeleton, tensors = flatten(obj)
    state = {f"t{i}": t.detach().cpu() for i, t in enumerate(tensors)}
    state[SKELETON_KEY] = torch.frombuffer(bytearray(skeleton), dtype=torch.uint8)
    dcp.save(state, checkpoint_id=str(path), no_dist=True)


def _load(path: Path):
    import torch.distributed.checkpoint as dcp  # imported here: see _save

    metadata = dcp.FileSystemReader(str(path)).read_metadata()
    template = {
        key: torch.empty(tuple(meta.size), dtype=meta.properties.dtype)
        for key, meta in metadata.state_dict_metadata.items()
    }
    dcp.load(template, checkpoint_id=str(path), no_dist=True)
    skeleton = template.pop(SKELETON_KEY).numpy().tobytes()
    return unflatten(skeleton, [template[f"t{i}"] for i in range(len(template))])


def _state_part(shard: int | None) -> str:
    return "replicated" if shard is None else f"shard_{shard}"


def save_state(root: Path, step: int, state: dict, shard: int | None = None) -> None:
    """The model, optimizer, scheduler and extras state: the replicated one, or rank `shard`'s
    shards of it."""
    _save(state, step_dir(root, step) / _state_part(shard))


def save_per_rank(root: Path, step: int, rank: int, state: dict) -> None:
    _save(state, step_dir(root, step) / f"rank_{rank}")


def mark_complete(root: Path, step: int, keep: int) -> None:
    (step_dir(root, step) / "COMPLETE").touch()
    complete = sorted(p.parent for p in Path(root).glob("step_*/COMPLETE"))
    for old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def newest_complete(root: Path | None) -> int | None:
    if root is None or not Path(root).is_dir():
        return None
    steps = [int(p.parent.name.split("_")[1]) for p in Path(root).glob("step_*/COMPLETE")]
    return max(steps, default=None)


def load_state(root: Path, step: int, shard: int | None = None) -> dict:
    return _load(step_dir(root, step) / _state_part(shard))


def load_per_rank(root: Path, step: int, rank: int) -> dict:
    return _load(step_dir(root, step) / f"rank_{rank}")
