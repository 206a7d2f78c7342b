"""A job running a script of tests/agent/scripts under `yoco-agent run` (tests only):
unmodified under `--transparent`, or a model-aware one."""

from __future__ import annotations

from pathlib import Path

from bench.job import LaunchedJob
from tests.agent.conftest import PYTHON, REPO, SPARES_START, Job

SCRIPTS = REPO / "tests/agent/scripts"


class TransparentJob(Job):
    def __init__(
        self,
        tmp: Path,
        script: str,
        workers: int,
        spares: int,
        script_args,
        extra=(),
        transparent=True,
    ):
        command = [
            PYTHON, "-m", "agent.cli", "run", *(["--transparent"] if transparent else []),
            "--workers", str(workers),
            "--spares", str(spares), "--events", str(tmp / "events.jsonl"), "--status-file",
            str(tmp / "status.json"), "--cluster", "ci", "--job", tmp.name, "--join-timeout", "120",
            "--heartbeat-timeout", "3", *SPARES_START, *extra, "--", PYTHON, str(SCRIPTS / script),
            *script_args,
            "--out", str(tmp / "out"),
        ]  # fmt: skip
        # Job's own __init__ runs the example GPT; the harness underneath runs this command.
        LaunchedJob.__init__(self, tmp, command, env={"YOCO_CONNECT_TIMEOUT_S": "20"})
