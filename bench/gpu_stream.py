"""The state stream between two processes on one GPU: part of bench/gpu_check.py (not a test).

Two processes, a sender and a receiver, each holding a state of N GiB in 256 MiB tensors on the
same CUDA device (the receiver's are the tensors it would train with). For each size, in one
run, in the same two processes:

* device_to_device: agent.transport as a migration uses it, choosing the CUDA IPC path itself;
* host_staged: agent.transport with YOCO_STATE_PATH=host (what crosses hosts), plus the copy
  of what arrived into the receiver's GPU tensors;
* raw_ipc: the floor: the same tensors' CUDA IPC handles sent with nothing else, opened and
  copied by the receiver; no skeleton, no negotiation, no acknowledgement protocol beyond one.

Every transfer is timed on the receiver, from a barrier to the bytes being in its GPU tensors
(synchronised), and checked against the sender's fingerprint of the bytes. device_to_device and
raw_ipc run two rounds each, alternating (first and best kept); host_staged one. A transfer that
would not fit in the time left (estimated from the same path's rate so far) is skipped and
reported as such.

    PYTHONPATH=. python3 -m bench.gpu_stream --sizes-gb 1 4 16 --budget-s 200
    PYTHONPATH=. python3 -m bench.gpu_stream --device cpu --sizes-gb 0.25   # harness smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import queue
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from agent.cuda_stream import PATH_ENV
from agent.transport import pair_group, recv_state, send_state

GIB = 1 << 30
TENSOR_BYTES = 256 << 20


def _state(nbytes: int, device: str) -> dict:
    count = max(1, nbytes // TENSOR_BYTES)
    words = min(nbytes, TENSOR_BYTES) // 4
    return {
        "models": [
            {f"w{i}": torch.empty(words, dtype=torch.float32, device=device) for i in range(count)}
        ]
    }


def _tensors(state: dict) -> list[torch.Tensor]:
    return list(state["models"][0].values())


def _fingerprint(state: dict) -> list[int]:
    """Per tensor, the wrapping sum of its 8-byte words: equal bytes, equal fingerprints."""
    return [int(t.view(torch.int64).sum()) for t in _tensors(state)]


def _send_blob(group, obj) -> None:
    blob = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    group.send([torch.tensor([blob.numel()])], 1, 0).wait()
    group.send([blob], 1, 0).wait()


def _recv_blob(group):
    length = torch.zeros(1, dtype=torch.int64)
    group.recv([length], 0, 0).wait()
    blob = torch.empty(int(length.item()), dtype=torch.uint8)
    group.recv([blob], 0, 0).wait()
    return pickle.loads(blob.numpy().tobytes())


def _raw_send(group, state: dict) -> None:
    from torch.multiprocessing.reductions import reduce_tensor

    torch.cuda.current_stream().synchronize()
    _send_blob(group, [reduce_tensor(t) for t in _tensors(state)])
    done = torch.zeros(1, dtype=torch.int64)
    group.recv([done], 1, 0).wait()


def _raw_recv(group, template: dict) -> None:
    handles = _recv_blob(group)
    remotes = [function(*arguments) for function, arguments in handles]
    for mine, remote in zip(_tensors(template), remotes, strict=True):
        mine.copy_(remote, non_blocking=True)
    torch.cuda.synchronize()
    remotes.clear()
    group.send([torch.tensor([1])], 0, 0).wait()


def _host_recv(group, template: dict) -> None:
    received = recv_state(group, template)
    for mine, arrived in zip(_tensors(template), _tensors(received.state), strict=True):
        if arrived.data_ptr() != mine.data_ptr():  # not received in place: load it
            mine.copy_(arrived)
    if template["models"][0]["w0"].is_cuda:
        torch.cuda.synchronize()


def _peer(rank: int, port: int, args, result) -> None:
    device = args.device
    if device == "cuda":
        torch.cuda.set_device(0)
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0)
    group = pair_group(store, "bench", rank, timeout_s=600)
    paths = ["device_to_device", "raw_ipc", "host_staged"] if device == "cuda" else ["host_staged"]
    rounds = ["device_to_device", "raw_ipc", "host_staged", "device_to_device", "raw_ipc"]
    rounds = [p for p in rounds if p in paths]
    deadline = time.monotonic() + args.budget_s
    figures: dict = {}
    for size_gb in args.sizes_gb:
        nbytes = int(size_gb * GIB)
        state = _state(nbytes, device)
        if rank == 0:
            for tensor in _tensors(state):
                tensor.view(torch.int32).random_()
            _send_blob(group, _fingerprint(state))
        else:
            expected = _recv_blob(group)
        entry = {p: [] for p in paths}
        for path in rounds:
            go = torch.zeros(1, dtype=torch.int64)
            if rank == 1:
                rates = [nbytes / s for s in entry[path] if isinstance(s, float)]
                estimate = nbytes / max(rates) if rates else 0.0
                room = deadline - time.monotonic()
                go[0] = int(estimate * 1.5 < room and room > 0)
                group.send([go], 0, 0).wait()
            else:
                group.recv([go], 1, 0).wait()
            if not go.item():
                entry[path].append("skipped: time bound")
                continue
            os.environ[PATH_ENV] = "host" if path == "host_staged" else "auto"
            if rank == 1:
                for tensor in _tensors(state):
                    tensor.zero_()
            group.barrier().wait()
            started = time.perf_counter()
            if rank == 0:
                if path == "raw_ipc":
                    _raw_send(group, state)
                else:
                    send_state(group, state)
                continue
            if path == "raw_ipc":
                _raw_recv(group, state)
            elif path == "host_staged":
                _host_recv(group, state)
            else:
                received = recv_state(group, state)
                landed = [t.data_ptr() for t in _tensors(received.state)]
                if landed != [t.data_ptr() for t in _tensors(state)]:
                    raise AssertionError("device_to_device did not land in place")
            seconds = time.perf_counter() - started
            if _fingerprint(state) != expected:
                raise AssertionError(f"{path} {size_gb} GiB: bytes differ from the sender's")
            entry[path].append(seconds)
        if rank == 1:
            figures[f"{size_gb:g}"] = _summary(nbytes, entry)
            print(f"stream {size_gb:g} GiB: {json.dumps(figures[f'{size_gb:g}'])}", flush=True)
        del state
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.ipc_collect()
            torch.cuda.empty_cache()
        group.barrier().wait()
    if rank == 1:
        result.put(figures)


def _summary(nbytes: int, entry: dict) -> dict:
    out: dict = {"bytes": nbytes}
    for path, times in entry.items():
        measured = [t for t in times if isinstance(t, float)]
        out[path] = {
            "gbps": round(nbytes / min(measured) / 1e9, 2) if measured else None,
            "first_gbps": round(nbytes / measured[0] / 1e9, 2) if measured else None,
            "seconds": [round(t, 4) if isinstance(t, float) else t for t in times],
        }
    d2d, raw = out.get("device_to_device", {}), out.get("raw_ipc", {})
    if d2d.get("gbps") and raw.get("gbps"):
        out["device_to_device_over_raw_ipc"] = round(d2d["gbps"] / raw["gbps"], 3)
    return out


def measure(sizes_gb: list[float], budget_s: float, device: str = "cuda") -> dict:
    """Run both peers; {size: figures}. Raises if a peer fails."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = argparse.Namespace(sizes_gb=sizes_gb, budget_s=budget_s, device=device)
    context = mp.get_context("spawn")
    result = context.Queue()
    peers = [context.Process(target=_peer, args=(r, port, args, result)) for r in (0, 1)]
    for peer in peers:
        peer.start()
    try:
        while True:
            try:
                figures = result.get(timeout=1)
                break
            except queue.Empty:
                failed = [p.exitcode for p in peers if p.exitcode]
                if failed:
                    raise RuntimeError(f"a stream peer failed (exit codes {failed})") from None
    finally:
        for peer in peers:
            peer.join(timeout=30)
            if peer.is_alive():
                peer.kill()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-gb", type=float, nargs="+", default=[1, 4, 16])
    parser.add_argument("--budget-s", type=float, default=200)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = parser.parse_args()
    print(json.dumps(measure(args.sizes_gb, args.budget_s, args.device), indent=2))


if __name__ == "__main__":
    main()
