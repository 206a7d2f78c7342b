"""Sharded jobs under the agent: what the shard mirror costs, and how long a kill stalls the job.
Writes bench/results/sharded.json.

    .venv/bin/python bench/sharded.py [--repeats 5] [--dim 768 --layers 3] [--blocks 6]

Two meshes on 4 ranks (gloo, CPU): pure FSDP (`--shard 4`) and HSDP (2 replica groups x 2
shards). The model is agent/examples/gpt.py's GPT, sharded with FSDP2 per block as in
agent/examples/fsdp_gpt.py, AdamW; at the default size (dim 768, 3 layers, 21.6 M parameters)
its training state (parameters and both AdamW moments) is 259 MB, sharded over the 4 ranks
(HSDP holds it twice). A small batch per rank (2 x 64 tokens) keeps a step near a second on 2
cores.

* mirror_step_ratio (FSDP; an HSDP job keeps no mirror: its replica is the live copy): step
  time with the shard mirror (agent/mirror.py: each rank sends its buddy the gradient shards it
  is about to apply, and a snapshot of its shards every 8 steps) over without, measured in the
  same 4 processes in alternating blocks of `--steps-per-block` steps after `--warmup-steps` of
  each kind (three snapshot cycles: the mirror's shared memory and buffers are sized and first
  touched in the first cycles of a job), so both see the same machine load. The step is the script's
  forward, backward, clipping and AdamW update; "with" adds the agent's mirror exchange exactly
  as `Run.step()` makes it (ShardMirror.exchange, commit). The ratio of medians is the target's;
  mirror_step_ratio_of_means also counts the snapshot steps.
  Measured twice: with the buddy on the same host, as here, the records go through shared
  memory (agent/mirror_link.py; the default `fsdp` figures), and forced over gloo
  (`buddy_on_another_host`: on one host that is loopback TCP, standing in for the network a
  buddy on another node is reached over).
* mirror_bytes_per_step: what a rank sends its buddy per step, averaged over the measured steps
  (one snapshot per 8: the steady rate); grad_bytes and snapshot_bytes split it.
* kill_to_next_step_s: SIGKILL of rank 1 -> the job's next completed step, through the real
  launcher and coordinator with a spare ready (FSDP: the shard from the buddy's mirror,
  replayed; HSDP: from the replica); kill_to_resumed_s and step_s_under_the_agent split it
  (bench.common.kill_to_next_step).

Each configuration runs --repeats times, interleaved (bench.common.interleaved); every figure is
median, min and max; the target (FSDP's mirror_step_ratio <= 1.05) is judged on the medians.
Every wait has a timeout and every process started is ended on error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.mirror import SNAPSHOT_EVERY  # noqa: E402
from bench.children import children_of, receive, store_client, store_server  # noqa: E402
from bench.common import (  # noqa: E402
    git_commit,
    interleaved,
    kill_to_next_step,
    spreads,
    write_result,
)

MESHES = {"fsdp": (("shard",), (4,)), "hsdp": (("replicate", "shard"), (2, 2))}
TARGET_RATIO = 1.05
TIMEOUT_S = 600.0


def log(msg: str) -> None:
    print(f"[sharded bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def model_args(args) -> list[str]:
    return ["--dim", str(args.dim), "--layers", str(args.layers), "--heads", str(args.heads),
            "--seq", str(args.seq), "--batch", str(args.batch)]  # fmt: skip


def build(mesh, args):
    """fsdp_gpt.py's model and optimizer: the GPT sharded per block over `mesh`, AdamW."""
    from torch.distributed.fsdp import fully_shard

    from agent.examples.gpt import GPT

    torch.manual_seed(0)
    model = GPT(256, args.seq, args.dim, args.heads, args.layers, 0.0)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)


def data_of(rank: int, args):
    from agent.examples.data import SyntheticTokens

    return SyntheticTokens(0, rank, args.batch, args.seq, 256)


def forward_backward(model, data) -> None:
    inputs, targets = data.next_batch()
    model(inputs, targets).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)


# --------------------------------------------------------------------------- the mirror's cost


def _mirror_peer(rank: int, port: int, mesh: str, shared_memory: bool, args, result) -> None:
    """The same FSDP2 step with and without the mirror exchange, in alternating blocks."""
    from torch.distributed.device_mesh import init_device_mesh

    from agent.mirror import ShardMirror
    from agent.state import Registry, local_shards

    torch.set_num_threads(1)
    store = store_client(port, TIMEOUT_S)
    world = 4
    dist.init_process_group("gloo", store=dist.PrefixStore("fsdp/", store), rank=rank,
                            world_size=world)  # fmt: skip
    names, shape = MESHES[mesh]
    model, optimizer = build(init_device_mesh("cpu", shape, mesh_dim_names=names), args)
    data = data_of(rank, args)
    # The agent exchanges the mirror over its own group (Run.group), as here.
    group = dist.ProcessGroupGloo(
        dist.PrefixStore("mirror/", store), rank, world, datetime.timedelta(seconds=TIMEOUT_S)
    )
    registry = Registry(models=[model], optimizers=[optimizer], sharded=True)
    mirror, abort = ShardMirror(shared_memory=shared_memory), threading.Event()
    mirror_steps = 0  # the mirror's own step count: a snapshot every 8 of them
    sent: list[int] = []

    def step(with_mirror: bool) -> int:
        """One training step; the bytes this rank sent its buddy."""
        nonlocal mirror_steps
        forward_backward(model, data)
        nbytes = 0
        if with_mirror:
            grads = [local_shards(p.grad) for p in model.parameters()]
            state = lambda: registry.transfer_state(mirror_steps)  # noqa: E731
            if not mirror.exchange(group, rank, world, mirror_steps, state, grads, abort):
                raise RuntimeError("the mirror exchange failed")
            mirror.commit()
            nbytes = mirror.bytes_sent
            mirror_steps += 1
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return nbytes

    times: dict[str, list[float]] = {"plain": [], "mirror": []}
    for block in range(args.blocks + 1):
        order = ("plain", "mirror") if block % 2 else ("mirror", "plain")
        for kind in order:
            for _ in range(args.steps_per_block if block else args.warmup_steps):
                started = time.perf_counter()
                nbytes = step(kind == "mirror")
                if block:  # the first block of each kind warms up
                    times[kind].append(time.perf_counter() - started)
                    if kind == "mirror":
                        sent.append(nbytes)
    state_bytes = torch.tensor(
        [sum(t.numel() * t.element_size() for t in _tensors(registry.transfer_state(0)))],
        dtype=torch.int64,
    )
    dist.all_reduce(state_bytes)
    dist.destroy_process_group()
    if rank == 0:
        medians = {kind: sorted(ts)[len(ts) // 2] for kind, ts in times.items()}
        means = {kind: sum(ts) / len(ts) for kind, ts in times.items()}
        grads = min(sent)
        result.put(
            {
                "transport": mirror.transport,
                "mirror_step_ratio": medians["mirror"] / medians["plain"],
                "mirror_step_ratio_of_means": means["mirror"] / means["plain"],
                "step_s_with_mirror": medians["mirror"],
                "step_s_without_mirror": medians["plain"],
                "mirror_bytes_per_step": sum(sent) / len(sent),
                "grad_bytes": grads,
                "snapshot_bytes": max(sent) - grads,
                "state_bytes_all_ranks": int(state_bytes),
            }
        )


def _tensors(state) -> list[torch.Tensor]:
    from agent.skeleton import flatten

    return flatten(state)[1]


def mirror_cost(mesh: str, transport: str, args) -> dict:
    store = store_server(TIMEOUT_S)
    peers = [(rank, store.port, mesh, transport == "shared memory", args) for rank in range(4)]
    with children_of(_mirror_peer, peers) as (messages, children):
        result = receive(messages, children, TIMEOUT_S, "mirror cost")
    if result.pop("transport") != transport:
        raise RuntimeError(f"the mirror's records did not go through {transport}")
    return result


# --------------------------------------------------------------------------- a kill's stall


def recovery(mesh: str, args) -> dict:
    names, shape = MESHES[mesh]
    script = [sys.executable, __file__, "worker", ",".join(names), ",".join(map(str, shape)),
              *model_args(args)]  # fmt: skip
    launcher = ["--workers", "4", "--spares", "1", "--spares-start", "before-training"]
    # Past the mirror's snapshot of step 8: the spare replays the gradients since.
    return kill_to_next_step(launcher, script, TIMEOUT_S, warm_steps=11)


def worker(argv: list[str]) -> None:
    """The training script recovery() runs under the agent: fsdp_gpt.py's job, a mark per
    completed step."""
    import agent

    p = argparse.ArgumentParser()
    p.add_argument("names")
    p.add_argument("shape")
    add_model_options(p)
    args = p.parse_args(argv)
    run = agent.attach()
    names, shape = tuple(args.names.split(",")), tuple(int(x) for x in args.shape.split(","))
    model, optimizer = build(run.device_mesh(names, shape), args)  # a spare: once it has a rank
    data = data_of(run.rank, args)
    run.register(model=model, optimizer=optimizer, data=data)
    with open(os.environ["YOCO_BENCH_MARKS"], "a") as marks:
        for step in run.steps(10**9):
            forward_backward(model, data)
            if run.step():
                marks.write(f"{step},{time.time()}\n")
                marks.flush()


# --------------------------------------------------------------------------- main


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)


def main() -> None:
    global TIMEOUT_S
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeats", type=int, default=5, help="runs of each measurement")
    add_model_options(p)
    p.add_argument("--blocks", type=int, default=6, help="measured blocks of each kind")
    p.add_argument("--steps-per-block", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=3 * SNAPSHOT_EVERY,
                   help="steps of each kind before the measured blocks")  # fmt: skip
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per measurement")
    p.add_argument("--output", type=Path, help="default bench/results/sharded.json")
    args = p.parse_args()
    TIMEOUT_S = args.timeout
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"sharded bench: signal {signum}"))
    commit = git_commit()  # the code measured, before anything can change the work tree
    started = time.monotonic()
    configurations = {}
    configurations["mirror_fsdp"] = lambda: mirror_cost("fsdp", "shared memory", args)
    configurations["mirror_fsdp_gloo"] = lambda: mirror_cost("fsdp", "gloo", args)
    for mesh in MESHES:
        configurations[f"recovery_{mesh}"] = lambda mesh=mesh: recovery(mesh, args)
    try:
        raw = interleaved(configurations, args.repeats, log)
    except (RuntimeError, TimeoutError, OSError) as error:
        sys.exit(f"sharded bench: FAILED, nothing written: {error}")
    figures = {name: spreads(runs) for name, runs in raw.items()}
    results = {
        "repeats": args.repeats,
        "config": {
            "ranks": 4,
            "meshes": {mesh: dict(zip(*MESHES[mesh], strict=True)) for mesh in MESHES},
            "model": " ".join(model_args(args)),
            "steps_per_block": args.steps_per_block,
            "blocks": args.blocks,
            "warmup_steps": args.warmup_steps,
        },
        "machine": {"device": "cpu (gloo over loopback)"},
        "fsdp": {
            "mirror_transport": "shared memory (the buddy on the same host)",
            **_per_mesh(figures["mirror_fsdp"], figures["recovery_fsdp"]),
            "buddy_on_another_host": {
                "mirror_transport": "gloo (here over loopback TCP)",
                **figures["mirror_fsdp_gloo"],
            },
        },
        "hsdp": {
            "mirror": "none (its replica is the live copy)",
            **_per_mesh({}, figures["recovery_hsdp"]),
        },
        "targets": {"fsdp_mirror_step_ratio": _target(figures["mirror_fsdp"]["mirror_step_ratio"])},
        "bench_wall_s": round(time.monotonic() - started, 1),
    }
    path = write_result("sharded", results, commit, args.output)
    log(f"wrote {path}")
    print(json.dumps(results, indent=1))


def _per_mesh(mirror: dict, recovery: dict) -> dict:
    return {
        **mirror,
        "kill_to_next_step_s": recovery["kill_to_next_step_s"],
        "kill_to_resumed_s": recovery["kill_to_resumed_s"],
        "step_s_under_the_agent": recovery["step_s"],
    }


def _target(ratio: dict) -> dict:
    value = ratio["median"]
    return {"value": value, "target": f"≤ {TARGET_RATIO}", "met": value <= TARGET_RATIO}


if __name__ == "__main__":
    main()
