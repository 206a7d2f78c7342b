"""A job running a script of tests/agent/scripts under `yoco-agent run` (tests only):
unmodified under `--transparent`, or a model-aware one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.agent.conftest import PYTHON, REPO, Job

SCRIPTS = REPO / "tests/agent/scripts"


class TransparentJob(Job):
    def __init__(
        self, tmp: Path, script: str, workers: int, spares: int, script_args, transparent=True
    ):
        self.dir = tmp
        self.events_path = tmp / "events.jsonl"
        self.status_path = tmp / "status.json"
        self.out = tmp / "out"
        command = [
            PYTHON, "-m", "agent.cli", "run", *(["--transparent"] if transparent else []),
            "--workers", str(workers),
            "--spares", str(spares), "--events", str(self.events_path), "--status-file",
            str(self.status_path), "--cluster", "ci", "--job", tmp.name, "--join-timeout", "120",
            "--heartbeat-timeout", "3", "--", PYTHON, str(SCRIPTS / script), *script_args,
            "--out", str(self.out),
        ]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=str(REPO), YOCO_CONNECT_TIMEOUT_S="20")
        self.log = open(tmp / "launcher.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
