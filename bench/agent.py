"""Benchmarks for the YOCO agent (not a test). Writes bench/results/agent.json.

    .venv/bin/python bench/agent.py [--quick]

* memcpy_gbps, tcp_gbps, gloo_p2p_gbps: what the machine can move, 1 GiB each; gloo is the best
  of several chunkings with many sends in flight.
* migration_gbps: agent.transport streaming a 1 GiB state (many tensors) between two processes,
  checksums included: the same path a migration takes.
* overhead_ratio: step time of the agent's training step (flat-buffer all-reduce with the
  per-rank mirror riding along) over plain DDP, 2 ranks, same model.
* recovery_s: SIGKILL of a worker -> next completed step, through the real launcher and
  coordinator, for states of 100 MB, 1 GB and 4 GB.
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


def _gloo_peer(rank: int, port: int, chunkings: list[int], result) -> None:
    torch.set_num_threads(1)
    group = _pair(rank, port)
    buf = torch.ones(GIB, dtype=torch.uint8) if rank == 0 else torch.zeros(GIB, dtype=torch.uint8)
    rates = {}
    for pieces in chunkings:
        chunks = buf.view(pieces, -1)
        group.barrier().wait()
        t = time.perf_counter()
        if rank == 0:
            works = [group.send([c], 1, i) for i, c in enumerate(chunks)]
        else:
            works = [group.recv([c], 0, i) for i, c in enumerate(chunks)]
        for w in works:
            w.wait()
        rates[pieces] = GIB / (time.perf_counter() - t) / 1e9
    if rank == 1:
        result.put(rates)


def _migration_peer(rank: int, port: int, tensors: int, result) -> None:
    from agent.transport import recv_state, send_state

    torch.set_num_threads(1)
    group = _pair(rank, port)
    size = GIB // 4 // tensors
    state = {"model": {f"w{i}": torch.full((size,), float(rank)) for i in range(tensors)}}
    rates = []
    for _ in range(2):
        group.barrier().wait()
        t = time.perf_counter()
        if rank == 0:
            send_state(group, state)
        else:
            received = recv_state(group, state)
            assert torch.equal(received.state["model"]["w0"], torch.zeros(size))
        rates.append(GIB / (time.perf_counter() - t) / 1e9)
    if rank == 1:
        result.put(max(rates))


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


def _step_time_peer(rank: int, port: int, mode: str, steps: int, result) -> None:
    from agent.reducer import FlatReducer
    from agent.state import Registry, encode_per_rank

    torch.set_num_threads(1)
    torch.manual_seed(0)
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=60))
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)])
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(64, 1024)
    if mode == "ddp":
        dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
        net = torch.nn.parallel.DistributedDataParallel(model)
    else:
        group = dist.ProcessGroupGloo(store, rank, 2, datetime.timedelta(seconds=120))
        registry = Registry(models=[model], optimizers=[optimizer])
        reducer = FlatReducer(list(model.parameters()), 2, 64 * 1024)
        abort = threading.Event()
        net = model
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        net(x).square().mean().backward()
        if mode == "agent":
            blob = encode_per_rank(registry.per_rank_state())
            reducer.all_reduce(group, rank, blob, False, abort)
            optimizer.step()
            reducer.zero_grads()
        else:
            optimizer.step()
            optimizer.zero_grad()
        times.append(time.perf_counter() - t)
    if rank == 0:
        times = sorted(times[3:])
        result.put(times[len(times) // 2])


def overhead_ratio(steps: int) -> tuple[float, float, float]:
    plain = _two_processes(_step_time_peer, "ddp", steps)
    agent = _two_processes(_step_time_peer, "agent", steps)
    return agent / plain, agent, plain


def recovery_s(state_bytes: int) -> float:
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
        while not (marks.exists() and len(marks.read_text().split()) >= 6):
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
                return max(0.0, min(resumed) - killed)
            time.sleep(0.02)
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        for m in json.loads(status.read_text())["members"] if status.exists() else []:
            try:
                os.killpg(m["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


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
    gloo = _two_processes(_gloo_peer, [1, 16, 64, 128])
    results["gloo_p2p_by_chunks"] = {str(k): round(v, 3) for k, v in gloo.items()}
    results["gloo_p2p_gbps"] = round(max(gloo.values()), 3)
    results["migration_gbps"] = round(_two_processes(_migration_peer, 64), 3)
    results["migration_vs_gloo"] = round(results["migration_gbps"] / results["gloo_p2p_gbps"], 3)
    results["migration_vs_memcpy"] = round(results["migration_gbps"] / results["memcpy_gbps"], 3)
    ratio, agent_s, plain_s = overhead_ratio(15 if quick else 40)
    results["overhead_ratio"] = round(ratio, 4)
    results["step_s"] = {"agent": round(agent_s, 5), "plain_ddp": round(plain_s, 5)}
    sizes = {"100MB": 100 * 10**6, "1GB": 10**9} if quick else {
        "100MB": 100 * 10**6, "1GB": 10**9, "4GB": 4 * 10**9}  # fmt: skip
    results["recovery_s"] = {name: round(recovery_s(size), 3) for name, size in sizes.items()}
    out = REPO / "bench" / "results" / "agent.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
