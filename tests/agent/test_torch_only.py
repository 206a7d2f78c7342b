"""A job runs on a host with torch alone (the GPU host of issue 17: no typer, rich or
requests, nothing installed): `python -m agent.launcher` from the checkout, with those packages
made unimportable in every process of the job, including a drain; and the GPU check skips
cleanly without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from agent.protocol import control_request
from bench.job import REPO, LaunchedJob
from tests.agent.conftest import GPT_ARGS

pytestmark = pytest.mark.agent

# Run a module or a script with the operator-only packages unimportable (None in sys.modules).
WITHOUT_EXTRAS = (
    "import runpy, sys; sys.modules.update(typer=None, rich=None, requests=None); "
    "target = sys.argv.pop(1); "
    "runpy.run_module(target[3:], run_name='__main__', alter_sys=True) if target.startswith('-m:')"
    " else runpy.run_path(target, run_name='__main__')"
)


def test_a_job_migrates_with_torch_alone(tmp_path):
    bare = [sys.executable, "-c", WITHOUT_EXTRAS]
    command = [
        *bare, "-m:agent.launcher", "--workers", "2", "--spares", "1",
        "--events", str(tmp_path / "events.jsonl"), "--status-file", str(tmp_path / "status.json"),
        "--heartbeat-timeout", "3", "--join-timeout", "60", "--",
        *bare, str(REPO / "agent/examples/gpt.py"), *GPT_ARGS, "--step-sleep", "0.05",
    ]  # fmt: skip
    job = LaunchedJob(tmp_path, command, env={"YOCO_CONNECT_TIMEOUT_S": "20"})
    try:
        job.wait_step(5)
        assert control_request(job.address(), {"type": "drain", "rank": 1})["ok"]
        assert job.wait_done() == 0, job.output()
    finally:
        job.stop()
    kinds = [e["type"].removeprefix("io.yoco.") for e in job.events()]
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
