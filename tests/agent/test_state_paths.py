"""Which path a state takes between two processes (device to device or host staged), which
backend a training group uses, and the transport over a real gloo pair on each path.

The CUDA tests need a GPU and skip without one; bench/gpu_check.sh runs the rest of the GPU
path (a migrating job, NVML, the stream at 1-16 GiB) on a GPU host.
"""

from __future__ import annotations

import datetime
import socket
import threading

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hypothesis import given
from hypothesis import strategies as st

from agent import cuda_stream
from agent.devices import Endpoint, device_to_device, group_backend, here
from agent.transport import pair_group, recv_state, send_state

pytestmark = pytest.mark.agent
needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device: the device-to-device path needs one"
)

GPU0, GPU1 = "GPU-aaaa", "GPU-bbbb"


def gpu(device: int, uuids=(GPU0, GPU1), peers=None, host="h1/boot") -> Endpoint:
    return Endpoint(host, device, tuple(uuids), tuple(peers if peers is not None else [device]))


def test_same_device_on_one_host_goes_device_to_device():
    assert device_to_device(gpu(0), gpu(0))


def test_other_hosts_and_cpu_are_host_staged():
    assert not device_to_device(gpu(0, host="h1/boot"), gpu(0, host="h2/boot"))
    assert not device_to_device(gpu(0), Endpoint("h1/boot", None))
    assert not device_to_device(Endpoint("h1/boot", None), gpu(0))


def test_another_device_needs_peer_access():
    assert device_to_device(gpu(0), gpu(1, peers=[1, 0]))
    assert not device_to_device(gpu(0), gpu(1, peers=[1]))


def test_devices_masked_differently_are_host_staged():
    """The receiver sees another GPU under the sender's index (CUDA_VISIBLE_DEVICES differs):
    an IPC handle naming device 0 would open the wrong one."""
    assert not device_to_device(gpu(0, uuids=(GPU0,)), gpu(0, uuids=(GPU1,)))
    assert not device_to_device(gpu(1), gpu(0, uuids=(GPU0,)))


def test_a_device_without_uuid_is_host_staged():
    assert not device_to_device(gpu(0, uuids=("",)), gpu(0, uuids=("",)))


endpoints = st.builds(
    Endpoint,
    host=st.sampled_from(["h1/boot", "h2/boot"]),
    device=st.none() | st.integers(0, 2),
    uuids=st.lists(st.sampled_from(["", GPU0, GPU1]), max_size=3).map(tuple),
    peers=st.lists(st.integers(0, 2), max_size=3).map(tuple),
)


@given(endpoints, endpoints)
def test_device_to_device_only_where_the_target_can_read_the_source(source, target):
    if device_to_device(source, target):
        assert source.host == target.host
        assert source.device is not None and target.device is not None
        assert source.uuids[source.device] == target.uuids[source.device] != ""
        assert target.device == source.device or source.device in target.peers


def test_nccl_only_with_a_gpu_per_rank():
    assert group_backend([("a", "cuda:0 NVIDIA H200"), ("a", "cuda:1 NVIDIA H200")]) == "nccl"
    assert group_backend([("a", "cuda:0 NVIDIA H200"), ("b", "cuda:0 NVIDIA H200")]) == "nccl"
    # One GPU host: NCCL refuses two ranks on one device, gloo reduces the CUDA tensors.
    assert group_backend([("a", "cuda:0 NVIDIA H200"), ("a", "cuda:0 NVIDIA H200")]) == "gloo"
    assert group_backend([("a", "cpu"), ("b", "cpu")]) == "gloo"
    assert group_backend([("a", "cuda:0 X"), ("b", "cpu")]) == "gloo"


def test_this_process_without_cuda_is_a_cpu_endpoint():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert here().device is None


def _state(device: str) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32).to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 64, device=device)).sum().backward()
    optimizer.step()
    return {"models": [model.state_dict()], "optimizers": [optimizer.state_dict()], "step": 3}


def _pair_in_threads(sender, receiver):
    """A real gloo pair: rank 0 and rank 1 in two threads of this process."""
    store = dist.HashStore()
    results = {}

    def side(rank, fn):
        try:
            results[rank] = fn(pair_group(store, "t", rank, timeout_s=60))
        except Exception as error:  # surfaced below
            results[rank] = error

    threads = [threading.Thread(target=side, args=(0, sender)),
               threading.Thread(target=side, args=(1, receiver))]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for value in results.values():
        if isinstance(value, Exception):
            raise value
    return results


@pytest.mark.parametrize("path", ["auto", "host"])
def test_cpu_state_streams_host_staged_in_place(monkeypatch, path):
    monkeypatch.setenv(cuda_stream.PATH_ENV, path)
    source, template = _state("cpu"), _state("cpu")
    for tensor in template["models"][0].values():
        tensor.zero_()
    decisions = []
    negotiate = cuda_stream.negotiate
    monkeypatch.setattr(
        cuda_stream, "negotiate", lambda g, r: decisions.append(negotiate(g, r)) or decisions[-1]
    )
    results = _pair_in_threads(lambda g: send_state(g, source), lambda g: recv_state(g, template))
    assert decisions == [False, False]
    received = results[1].state
    for name, tensor in source["models"][0].items():
        assert torch.equal(received["models"][0][name], tensor)
        assert received["models"][0][name].data_ptr() == template["models"][0][name].data_ptr()
    assert received["optimizers"][0]["state"][0]["exp_avg"].equal(
        source["optimizers"][0]["state"][0]["exp_avg"]
    )
    assert results[0] == results[1].nbytes > 0


# -- on a GPU -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gpu_peer(rank: int, port: int, path: str, results) -> None:
    import os

    os.environ[cuda_stream.PATH_ENV] = path
    torch.cuda.set_device(0)
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=60))
    group = pair_group(store, "gpu", rank, timeout_s=60)
    decided = cuda_stream.negotiate(group, rank)
    state = _state("cuda")
    if rank == 0:
        send_state(group, state)
        # The optimizer's own per-parameter dicts are in the state: sharing must not touch them.
        untouched = type(state["optimizers"][0]["state"][0]["exp_avg"]) is torch.Tensor
        results.put(("sender", decided, untouched))
        return
    template = _state("cuda")
    for tensor in template["models"][0].values():
        tensor.zero_()
    received = recv_state(group, template).state
    in_place = all(
        received["models"][0][k].data_ptr() == template["models"][0][k].data_ptr()
        for k in template["models"][0]
    )
    equal = all(
        torch.equal(received["models"][0][k].cpu(), v.cpu()) for k, v in state["models"][0].items()
    )
    metadata = hasattr(received["models"][0], "_metadata")  # module versions, for loading
    detail = (in_place, equal, received["models"][0]["weight"].device, metadata)
    results.put(("receiver", decided, detail))


def _run_gpu_pair(path: str) -> dict:
    context = mp.get_context("spawn")
    results = context.Queue()
    port = _free_port()
    peers = [context.Process(target=_gpu_peer, args=(r, port, path, results)) for r in (0, 1)]
    for p in peers:
        p.start()
    got = dict((role, (decided, detail)) for role, decided, detail in
               (results.get(timeout=120) for _ in peers))  # fmt: skip
    for p in peers:
        p.join(timeout=30)
    assert all(p.exitcode == 0 for p in peers)
    return got


@needs_cuda
def test_two_processes_on_one_gpu_stream_device_to_device_in_place():
    got = _run_gpu_pair("auto")
    assert got["sender"][0] and got["receiver"][0]
    assert got["sender"][1], "the sender's optimizer state was replaced"
    in_place, equal, device, metadata = got["receiver"][1]
    assert in_place and equal and device.type == "cuda" and metadata


@needs_cuda
def test_the_host_staged_path_still_carries_gpu_state():
    got = _run_gpu_pair("host")
    assert not got["sender"][0] and not got["receiver"][0]
    _, equal, _, metadata = got["receiver"][1]
    assert equal and metadata


@needs_cuda
def test_nvml_reads_the_training_device():
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    from agent.telemetry import NvmlSource

    readings = NvmlSource.for_cuda_device(0).sample()
    assert "temperature_c" in readings and "clock_reasons" in readings
