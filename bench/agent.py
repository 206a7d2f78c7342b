"""Benchmarks for the YOCO agent (not a test). Writes bench/results/agent.json.

    .venv/bin/python bench/agent.py [--repeats 5] [--sizes 100MB,1GB] [--transfer-mib 1024]

Every measurement below runs ``--repeats`` times, interleaved (round-robin over the
measurements, each round in a rotated order, so that a change in machine load hits all alike);
each figure is reported as median, min and max over the repeats.

* memcpy_gbps, tcp_gbps, gloo_p2p_gbps: what the machine can move, 1 GiB each (--transfer-mib);
  gloo is the best of several chunkings with every send in flight at once.
* migration_gbps: agent.transport streaming a state of that size (64 tensors) between two
  processes, checksums included: the same path a migration takes. Measured in the same two
  processes as the raw gloo rates, one after the other; migration_vs_gloo is the ratio within
  each repeat.
* overhead_ratio: median step time of the agent's training step (bucketed all-reduce overlapping
  backward, the per-rank mirror riding along) over plain DDP, 2 ranks, same model, measured in
  the same processes in alternating blocks of steps.
* recovery_s: SIGKILL of a worker -> next completed step, through the real launcher and
  coordinator, with a spare ready, for states of each size (4GB needs ~16 GiB of memory:
  ``--sizes 100MB,1GB,4GB``); recovery_kill_to_resumed_s (kill -> job resumed) and
  recovery_step_s (the job's ordinary step time, the floor of the remainder) split it.

Run it twice in a row and `bench/reproduce.py agent FIRST.json` records whether the two runs'
ranges overlap on migration_gbps, overhead_ratio and recovery_s.

Every wait has a timeout and every process started is ended on error; every port is bound by
the process that listens on it (port 0) and handed to the others.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.children import children_of, receive, store_client, store_server  # noqa: E402
from bench.common import (  # noqa: E402
    git_commit,
    interleaved,
    kill_to_next_step,
    spreads,
    write_result,
)

SIZES = {"100MB": 100 * 10**6, "1GB": 10**9, "4GB": 4 * 10**9}
TIMEOUT_S = 300.0  # any one measurement; --timeout


def log(msg: str) -> None:
    print(f"[agent bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- measurements


def memcpy_gbps(nbytes: int) -> dict:
    a = torch.ones(nbytes, dtype=torch.uint8)
    b = torch.zeros_like(a)
    best = min(_timed(lambda: b.copy_(a)) for _ in range(3))
    return {"memcpy_gbps": nbytes / best / 1e9}


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _tcp_receiver(nbytes: int, messages) -> None:
    """Listens on a port it binds itself, says which, receives `nbytes`, says how fast."""
    buf = memoryview(bytearray(nbytes))
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)
        messages.put(server.getsockname()[1])
        conn, _ = server.accept()
        conn.settimeout(60)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        got, t = 0, time.perf_counter()
        while got < nbytes:
            n = conn.recv_into(buf[got:], min(nbytes - got, 4 << 20))
            if not n:
                raise ConnectionError(f"sender closed after {got} bytes")
            got += n
        messages.put({"tcp_gbps": nbytes / (time.perf_counter() - t) / 1e9})


def tcp_gbps(nbytes: int) -> dict:
    with children_of(_tcp_receiver, [(nbytes,)]) as (messages, children):
        port = receive(messages, children, TIMEOUT_S, "tcp receiver port")
        data = memoryview(bytearray(nbytes))
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            for start in range(0, nbytes, 4 << 20):
                sock.sendall(data[start : start + (4 << 20)])
        return receive(messages, children, TIMEOUT_S, "tcp receiver")


def _gloo_send_recv(group, rank: int, buf: torch.Tensor, pieces: int) -> float:
    chunks = buf.view(pieces, -1)
    group.barrier().wait()
    t = time.perf_counter()
    if rank == 0:
        works = [group.send([c], 1, i) for i, c in enumerate(chunks)]
    else:
        works = [group.recv([c], 0, i) for i, c in enumerate(chunks)]
    for w in works:
        w.wait()
    return buf.numel() / (time.perf_counter() - t) / 1e9


def _transfer_peer(rank: int, port: int, chunkings: list[int], nbytes: int, result) -> None:
    """Raw gloo send/recv (every chunk in flight at once) and the agent's migration stream, on
    the same pair of processes and for the same 1 GiB, one after the other so that both see
    the same machine load. The state is 64 float tensors, received in place."""
    from agent.transport import recv_state, send_state

    torch.set_num_threads(1)
    group = dist.ProcessGroupGloo(store_client(port), rank, 2, datetime.timedelta(seconds=120))
    fill = torch.ones if rank == 0 else torch.zeros
    buf = fill(nbytes, dtype=torch.uint8)
    tensors = 64
    size = nbytes // 4 // tensors
    state = {"model": {f"w{i}": torch.full((size,), float(rank)) for i in range(tensors)}}
    gloo = {str(pieces): _gloo_send_recv(group, rank, buf, pieces) for pieces in chunkings}
    group.barrier().wait()
    t = time.perf_counter()
    if rank == 0:
        send_state(group, state)
    else:
        received = recv_state(group, state)
        assert torch.equal(received.state["model"]["w0"], torch.zeros(size))
    migration = nbytes / (time.perf_counter() - t) / 1e9
    if rank == 1:
        best = max(gloo.values())
        result.put(
            {
                "gloo_p2p_gbps": best,
                "gloo_p2p_by_chunks": gloo,
                "migration_gbps": migration,
                "migration_vs_gloo": migration / best,
            }
        )


def transfer(nbytes: int) -> dict:
    store = store_server()
    args = [(rank, store.port, [1, 16, 64, 128], nbytes) for rank in range(2)]
    with children_of(_transfer_peer, args) as (messages, children):
        return receive(messages, children, TIMEOUT_S, "transfer")


def _step_time_peer(rank: int, port: int, steps: int, block: int, result) -> None:
    """Plain DDP and the agent's step on the same pair of processes, same model and data,
    alternating blocks of `block` steps so both see the same machine load."""
    from agent.reducer import FlatReducer
    from agent.state import Registry, encode_per_rank

    torch.set_num_threads(1)
    store = store_client(port)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)

    def build():
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)])
        return model, torch.optim.AdamW(model.parameters())

    x = torch.randn(64, 1024)
    plain_model, plain_optimizer = build()
    ddp = torch.nn.parallel.DistributedDataParallel(plain_model)
    model, optimizer = build()
    group = dist.ProcessGroupGloo(
        dist.PrefixStore("agent/", store), rank, 2, datetime.timedelta(seconds=120)
    )
    registry = Registry(models=[model], optimizers=[optimizer])
    reducer = FlatReducer(list(model.parameters()), 2, 64 * 1024)
    reducer.group = group  # buckets start reducing while backward runs
    abort = threading.Event()

    def plain_step():
        ddp(x).square().mean().backward()
        plain_optimizer.step()
        plain_optimizer.zero_grad()

    def agent_step():
        model(x).square().mean().backward()
        blob = encode_per_rank(registry.per_rank_state())
        reducer.all_reduce(group, rank, blob, False, abort)
        optimizer.step()
        reducer.zero_grads()

    times: dict[str, list[float]] = {"plain": [], "agent": []}
    for i in range(steps // block):
        for name, fn in (("plain", plain_step), ("agent", agent_step)):
            for _ in range(block):
                t = time.perf_counter()
                fn()
                if i:  # the first block of each warms up
                    times[name].append(time.perf_counter() - t)
    dist.destroy_process_group()
    if rank == 0:
        medians = {name: sorted(ts)[len(ts) // 2] for name, ts in times.items()}
        result.put(
            {
                "overhead_ratio": medians["agent"] / medians["plain"],
                "step_s": {"agent": medians["agent"], "plain_ddp": medians["plain"]},
            }
        )


def overhead(steps: int) -> dict:
    store = store_server()
    args = [(rank, store.port, steps, 5) for rank in range(2)]
    with children_of(_step_time_peer, args) as (messages, children):
        return receive(messages, children, TIMEOUT_S, "step time")


def recovery(state_bytes: int) -> dict:
    """Start 2 workers + 1 spare under the real launcher, wait for the spare to be ready,
    SIGKILL rank 1, time until the job's next completed step (the workers mark each)."""
    params = state_bytes // 8  # SGD with momentum: state = parameters + momentum
    return kill_to_next_step(
        ["--workers", "2", "--spares", "1"],
        [sys.executable, __file__, "worker", str(params)],
        TIMEOUT_S,
    )


def worker(params: int) -> None:
    """The training script recovery() runs: one big layer, tiny batch, a mark per step."""
    import agent

    run = agent.attach()
    torch.manual_seed(0)
    model = torch.nn.Linear(params // 1024, 1024, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9)
    run.register(model=model, optimizer=optimizer)
    x = torch.randn(1, params // 1024)
    with open(os.environ["YOCO_BENCH_MARKS"], "a") as marks:
        for step in run.steps(10**9):
            model(x).sum().backward()
            if run.step():
                marks.write(f"{step},{time.time()}\n")
                marks.flush()
            time.sleep(0.02)


# --------------------------------------------------------------------------- main


def main() -> None:
    global TIMEOUT_S
    if sys.argv[1:2] == ["worker"]:
        worker(int(sys.argv[2]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeats", type=int, default=5, help="runs of each measurement")
    p.add_argument("--sizes", default="100MB,1GB", help=f"recovery states, of {','.join(SIZES)}")
    p.add_argument("--overhead-steps", type=int, default=40, help="per repeat and kind of step")
    p.add_argument("--transfer-mib", type=int, default=1024, help="memcpy, tcp, gloo, migration")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per measurement")
    p.add_argument("--output", type=Path, help="default bench/results/agent.json")
    args = p.parse_args()
    TIMEOUT_S = args.timeout
    # SIGTERM ends the run through every `finally`, so no child outlives it.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"agent bench: signal {signum}"))
    commit = git_commit()  # the code measured, before anything can change the work tree
    sizes = args.sizes.split(",")
    nbytes = args.transfer_mib << 20
    started = time.monotonic()
    configurations = {
        "memcpy": lambda: memcpy_gbps(nbytes),
        "tcp": lambda: tcp_gbps(nbytes),
        "transfer": lambda: transfer(nbytes),
        "overhead": lambda: overhead(args.overhead_steps),
        **{f"recovery_{size}": (lambda size=size: recovery(SIZES[size])) for size in sizes},
    }
    try:
        raw = interleaved(configurations, args.repeats, log)
    except (RuntimeError, TimeoutError, OSError) as error:
        sys.exit(f"agent bench: FAILED, nothing written: {error}")
    figures = {name: spreads(runs) for name, runs in raw.items()}
    recovery_figures = {size: figures[f"recovery_{size}"] for size in sizes}
    results = {
        "repeats": args.repeats,
        "transfer_mib": args.transfer_mib,
        "machine": {"device": "cpu (gloo over loopback)"},
        **figures["memcpy"],
        **figures["tcp"],
        **figures["transfer"],
        **figures["overhead"],
        "recovery_s": {s: f["kill_to_next_step_s"] for s, f in recovery_figures.items()},
        "recovery_kill_to_resumed_s": {
            s: f["kill_to_resumed_s"] for s, f in recovery_figures.items()
        },
        "recovery_step_s": {s: f["step_s"] for s, f in recovery_figures.items()},
        "bench_wall_s": round(time.monotonic() - started, 1),
    }
    path = write_result("agent", results, commit, args.output)
    log(f"wrote {path}")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
