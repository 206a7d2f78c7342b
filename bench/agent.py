"""Benchmarks for the YOCO agent (not a test). Writes bench/results/agent.json.

    .venv/bin/python bench/agent.py [--quick]

* memcpy_gbps, tcp_gbps, gloo_p2p_gbps: what the machine can move, 1 GiB each; gloo is the best
  of several chunkings with every send in flight at once.
* migration_gbps: agent.transport streaming a 1 GiB state (64 tensors) between two processes,
  checksums included: the same path a migration takes. Measured in the same two processes as
  the raw gloo rates, alternating round by round; best round of each, and the per-round ratio.
* overhead_ratio: median step time of the agent's training step (bucketed all-reduce overlapping
  backward, the per-rank mirror riding along) over plain DDP, 2 ranks, same model, measured in
  the same processes in alternating blocks of steps.
* recovery_s: SIGKILL of a worker -> next completed step, through the real launcher and
  coordinator, for states of 100 MB, 1 GB and 4 GB; recovery_detail splits it into kill ->
  job resumed and the ordinary step time of that job (the floor of the remainder).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.launcher import kill_listed_processes  # noqa: E402

GIB = 1 << 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memcpy_gbps() -> float:
    a = torch.ones(GIB, dtype=torch.uint8)
    b = torch.zeros_like(a)
    best = min(_timed(lambda: b.copy_(a)) for _ in range(3))
    return GIB / best / 1e9


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _tcp_receiver(port: int, result) -> None:
    buf = memoryview(bytearray(GIB))
    with socket.create_server(("127.0.0.1", port)) as server:
        conn, _ = server.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        got, t = 0, time.perf_counter()
        while got < GIB:
            got += conn.recv_into(buf[got:], min(GIB - got, 4 << 20))
        result.put(GIB / (time.perf_counter() - t) / 1e9)


def tcp_gbps() -> float:
    port = free_port()
    ctx = mp.get_context("spawn")
    result = ctx.Queue()
    receiver = ctx.Process(target=_tcp_receiver, args=(port, result))
    receiver.start()
    data = memoryview(bytearray(GIB))
    for _ in range(100):
        try:
            sock = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            time.sleep(0.1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    for start in range(0, GIB, 4 << 20):
        sock.sendall(data[start : start + (4 << 20)])
    value = result.get()
    sock.close()
    receiver.join()
    return value


def _pair(rank: int, port: int):
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=60))
    return dist.ProcessGroupGloo(store, rank, 2, datetime.timedelta(seconds=120))


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
    return GIB / (time.perf_counter() - t) / 1e9


def _transfer_peer(rank: int, port: int, chunkings: list[int], rounds: int, result) -> None:
    """Raw gloo send/recv (every chunk in flight at once) and the agent's migration stream, on
    the same pair of processes and for the same 1 GiB, alternating round by round so that both
    see the same machine load. The state is 64 tensors of 16 MiB, received in place."""
    from agent.transport import recv_state, send_state

    torch.set_num_threads(1)
    group = _pair(rank, port)
    buf = torch.ones(GIB, dtype=torch.uint8) if rank == 0 else torch.zeros(GIB, dtype=torch.uint8)
    tensors = 64
    size = GIB // 4 // tensors
    state = {"model": {f"w{i}": torch.full((size,), float(rank)) for i in range(tensors)}}
    gloo: dict[int, list[float]] = {pieces: [] for pieces in chunkings}
    migration: list[float] = []
    for _ in range(rounds):
        for pieces in chunkings:
            gloo[pieces].append(_gloo_send_recv(group, rank, buf, pieces))
        group.barrier().wait()
        t = time.perf_counter()
        if rank == 0:
            send_state(group, state)
        else:
            received = recv_state(group, state)
            assert torch.equal(received.state["model"]["w0"], torch.zeros(size))
        migration.append(GIB / (time.perf_counter() - t) / 1e9)
    if rank == 1:
        result.put({"gloo": gloo, "migration": migration})


def _two_processes(target, *args):
    ctx = mp.get_context("spawn")
    result = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, port, *args, result)) for r in range(2)]
    for p in procs:
        p.start()
    value = result.get()
    for p in procs:
        p.join()
    return value


def _step_time_peer(rank: int, port: int, steps: int, block: int, result) -> None:
    """Plain DDP and the agent's step on the same pair of processes, same model and data,
    alternating blocks of `block` steps so both see the same machine load."""
    from agent.reducer import FlatReducer
    from agent.state import Registry, encode_per_rank

    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=60))
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
    if rank == 0:
        result.put({name: sorted(ts)[len(ts) // 2] for name, ts in times.items()})


def overhead_ratio(steps: int) -> tuple[float, float, float]:
    medians = _two_processes(_step_time_peer, steps, 5)
    return medians["agent"] / medians["plain"], medians["agent"], medians["plain"]


def recovery_s(state_bytes: int) -> dict:
    """Start 2 workers + 1 spare under the real launcher, SIGKILL rank 1, time until the
    job's next completed step (written by the workers as they finish each step)."""
    tmp = Path(tempfile.mkdtemp(prefix="yoco-recovery-"))
    marks = tmp / "steps.log"
    marks.unlink(missing_ok=True)
    status = tmp / "status.json"
    status.unlink(missing_ok=True)
    # SGD with momentum: state = parameters + momentum.
    params = state_bytes // 8
    env = dict(os.environ, PYTHONPATH=str(REPO), YOCO_BENCH_MARKS=str(marks))
    command = [
        sys.executable, "-m", "agent.cli", "run", "--workers", "2", "--spares", "1",
        "--events", str(tmp / "events.jsonl"), "--status-file", str(status),
        "--heartbeat-timeout", "5", "--", sys.executable, __file__, "worker", str(params),
    ]  # fmt: skip
    launcher = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        while not (marks.exists() and len(marks.read_text().split()) >= 8):
            time.sleep(0.05)
        pid = next(m["pid"] for m in json.loads(status.read_text())["members"]
                   if m["role"] == "worker" and m["rank"] == 1)  # fmt: skip
        before = len(marks.read_text().split())
        killed = time.time()
        os.kill(pid, signal.SIGKILL)
        while True:
            lines = marks.read_text().split()
            after = [float(x.split(",")[1]) for x in lines[before:] if x]
            resumed = [t for t in after if t > killed + 0.0]
            events = (tmp / "events.jsonl").read_text() if (tmp / "events.jsonl").exists() else ""
            if resumed and "job.resumed" in events:
                break
            time.sleep(0.02)
        # The parts: kill -> the job resumed (state moved, group re-formed), and one ordinary
        # step before the kill (the next completed step cannot come sooner than that).
        resumed_at = next(
            datetime.datetime.fromisoformat(e["time"]).timestamp()
            for e in map(json.loads, events.splitlines())
            if e["type"].endswith("job.resumed")
        )
        done: dict[int, float] = {}
        for line in lines[:before]:
            step, t = line.split(",")
            done[int(step)] = max(done.get(int(step), 0.0), float(t))
        ends = [done[k] for k in sorted(done)]
        gaps = sorted(b - a for a, b in zip(ends, ends[1:], strict=False))
        return {
            "kill_to_next_step_s": max(0.0, min(resumed) - killed),
            "kill_to_resumed_s": max(0.0, resumed_at - killed),
            "step_s": gaps[len(gaps) // 2],
        }
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        kill_listed_processes(status)


def worker(params: int) -> None:
    """The training script recovery_s runs: one big layer, tiny batch, a mark per step."""
    import agent

    run = agent.attach()
    torch.manual_seed(0)
    model = torch.nn.Linear(params // 1024, 1024, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9)
    run.register(model=model, optimizer=optimizer)
    x = torch.randn(1, params // 1024)
    marks = open(os.environ["YOCO_BENCH_MARKS"], "a")  # noqa: SIM115
    for step in run.steps(10**9):
        model(x).sum().backward()
        if run.step():
            marks.write(f"{step},{time.time()}\n")
            marks.flush()
        time.sleep(0.02)


def main() -> None:
    if sys.argv[1:2] == ["worker"]:
        worker(int(sys.argv[2]))
        return
    quick = "--quick" in sys.argv
    results: dict = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "device": "cpu (gloo over loopback)",
        }
    }
    results["memcpy_gbps"] = round(memcpy_gbps(), 3)
    results["tcp_gbps"] = round(tcp_gbps(), 3)
    chunkings = [1, 16, 64, 128]
    rounds = 2 if quick else 4
    transfer = _two_processes(_transfer_peer, chunkings, rounds)
    gloo, migration = transfer["gloo"], transfer["migration"]
    results["gloo_p2p_by_chunks"] = {str(k): round(max(v), 3) for k, v in gloo.items()}
    results["gloo_p2p_gbps"] = round(max(max(v) for v in gloo.values()), 3)
    results["migration_gbps"] = round(max(migration), 3)
    results["migration_vs_gloo"] = round(results["migration_gbps"] / results["gloo_p2p_gbps"], 3)
    results["migration_vs_memcpy"] = round(results["migration_gbps"] / results["memcpy_gbps"], 3)
    # Per round, migration over the best raw gloo of the same round: robust to machine load.
    per_round = [m / max(v[r] for v in gloo.values()) for r, m in enumerate(migration)]
    results["transfer_rounds"] = {
        "gloo_best_gbps": [round(max(v[r] for v in gloo.values()), 3) for r in range(rounds)],
        "migration_gbps": [round(m, 3) for m in migration],
        "migration_vs_gloo": [round(x, 3) for x in per_round],
    }
    ratio, agent_s, plain_s = overhead_ratio(30 if quick else 100)
    results["overhead_ratio"] = round(ratio, 4)
    results["step_s"] = {"agent": round(agent_s, 5), "plain_ddp": round(plain_s, 5)}
    sizes = {"100MB": 100 * 10**6, "1GB": 10**9} if quick else {
        "100MB": 100 * 10**6, "1GB": 10**9, "4GB": 4 * 10**9}  # fmt: skip
    detail = {name: recovery_s(size) for name, size in sizes.items()}
    results["recovery_s"] = {n: round(d["kill_to_next_step_s"], 3) for n, d in detail.items()}
    results["recovery_detail"] = {
        n: {k: round(v, 3) for k, v in d.items()} for n, d in detail.items()
    }
    out = REPO / "bench" / "results" / "agent.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
