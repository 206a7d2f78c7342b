"""A job runs on a host with torch alone (the GPU host of issue 17: no typer, rich or
requests, nothing installed): `python -m agent.launcher` from the checkout, with those packages
made unimportable in every process of the job, including a drain; and the GPU check skips
cleanly without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from agent.launcher import kill_listed_processes
from agent.protocol import control_request
from agent.reporter import read_jsonl
from tests.agent.conftest import GPT_ARGS, REPO

pytestmark = pytest.mark.agent

# Run a module or a script with the operator-only packages unimportable (None in sys.modules).
WITHOUT_EXTRAS = (
    "import runpy, sys; sys.modules.update(typer=None, rich=None, requests=None); "
    "target = sys.argv.pop(1); "
    "runpy.run_module(target[3:], run_name='__main__', alter_sys=True) if target.startswith('-m:')"
    " else runpy.run_path(target, run_name='__main__')"
)


def test_a_job_migrates_with_torch_alone(tmp_path):
    events, status = tmp_path / "events.jsonl", tmp_path / "status.json"
    bare = [sys.executable, "-c", WITHOUT_EXTRAS]
    command = [
        *bare, "-m:agent.launcher", "--workers", "2", "--spares", "1", "--events", str(events),
        "--status-file", str(status), "--heartbeat-timeout", "3", "--join-timeout", "60", "--",
        *bare, str(REPO / "agent/examples/gpt.py"), *GPT_ARGS, "--steps", "30",
        "--step-sleep", "0.05",
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(REPO), YOCO_CONNECT_TIMEOUT_S="20")
    job = subprocess.Popen(command, cwd=tmp_path, env=env, start_new_session=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and job.poll() is None:
            snapshot = json.loads(status.read_text()) if status.exists() else {}
            spares = [m for m in snapshot.get("members", []) if m["role"] == "spare"]
            if snapshot.get("step", 0) >= 5 and spares and all(m["ready"] for m in spares):
                break
            time.sleep(0.1)
        reply = control_request(snapshot["address"], {"type": "drain", "rank": 1})
        assert reply["ok"], reply
        output, _ = job.communicate(timeout=180)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, 9)
            job.wait()
        kill_listed_processes(status)
    assert job.returncode == 0, output
    kinds = [e["type"].removeprefix("io.yoco.") for e in read_jsonl(events)]
    assert "migration.completed" in kinds and kinds[-1] == "job.finished", kinds


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: run the check")
def test_the_gpu_check_skips_without_a_gpu():
    result_file = REPO / "bench/results/gpu.json"
    before = result_file.stat().st_mtime if result_file.exists() else None
    result = subprocess.run(
        ["bash", "bench/gpu_check.sh"], cwd=REPO, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHON=sys.executable),
    )  # fmt: skip
    assert result.returncode == 77, result.stdout + result.stderr
    assert result.stdout.startswith("SKIP: no CUDA device")
    assert (result_file.stat().st_mtime if result_file.exists() else None) == before
