"""A sharded job (FSDP2, 4-way) on two nodes survives a SIGKILL, even when the first spare dies
while receiving: the killed rank's shard comes from its buddy's mirror, which is on the other
node (a snapshot plus the gradient shards since, replayed through the optimizer on the spare);
the spare killed mid-migration hands the recovery to the next one; the survivors redo the
abandoned step; every rank's final shard is bit for bit the failure-free run's, no completed
step lost."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from bench.job import REPO, LaunchedJob
from tests.agent.conftest import (
    FSDP_4,
    FSDP_ARGS,
    FSDP_SCRIPT,
    PYTHON,
    assert_bit_identical,
    event_types,
    incidents,
)

pytestmark = pytest.mark.agent


class TwoNodeJob(LaunchedJob):
    """`yoco-agent coordinator`, then one `yoco-agent run --connect` per node, each named by
    YOCO_NODE: several nodes on one machine. Nodes join in the order added, so the first
    node's processes take the first ranks; the first step waits for the spares."""

    def __init__(self, tmp: Path, workers: int, spares: int):
        command = [
            PYTHON, "-m", "agent.cli", "coordinator", "--workers", str(workers), "--host",
            "127.0.0.1", "--advertise", "127.0.0.1", "--port", "0", "--store-port", "0",
            "--events", str(tmp / "events.jsonl"), "--status-file", str(tmp / "status.json"),
            "--cluster", "ci", "--job", tmp.name, "--join-timeout", "300",
            "--heartbeat-timeout", "3", "--await-spares", str(spares),
        ]  # fmt: skip
        super().__init__(tmp, command)
        self.nodes: list[subprocess.Popen] = []

    def add_node(self, name: str, procs: int, script_args: list[str], **env: str) -> None:
        joined = len(self.status().get("members", []))
        command = [
            PYTHON, "-m", "agent.cli", "run", "--connect", self.address(), "--procs",
            str(procs), "--", PYTHON, str(FSDP_SCRIPT), *script_args, "--out", str(self.out),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO), "YOCO_NODE": name, **env}
        self.nodes.append(
            subprocess.Popen(
                command,
                cwd=REPO,
                env=env,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        )
        self.wait_for(
            lambda: len(self.status().get("members", [])) == joined + procs,
            timeout=120,
            what=f"node {name}'s {procs} processes to join",
        )

    def stop(self) -> None:
        for node in self.nodes:
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        super().stop()


@pytest.fixture
def two_node_job(tmp_path):
    job = TwoNodeJob(tmp_path, workers=4, spares=2)
    yield job
    job.stop()


def test_fsdp_kill_recovered_from_the_mirror_on_another_node_past_a_dying_spare(
    two_node_job, fsdp_baseline
):
    job, args = two_node_job, FSDP_ARGS + FSDP_4 + ["--step-sleep", "0.1"]
    job.add_node("a", 2, args)  # ranks 0 and 1
    job.add_node("b", 2, args)  # ranks 2 and 3: every buddy is on the other node
    job.add_node("c", 2, args, YOCO_INJECT_RECV_DELAY_S="0.05")  # two spares
    job.wait_step(11)  # past the snapshot of step 8: the spare replays the steps since
    os.kill(job.worker_pid(1), signal.SIGKILL)
    transfer = job.wait_for(lambda: job.status().get("transfer"), what="a transfer in flight")
    os.kill(transfer["target_pid"], signal.SIGKILL)
    assert job.wait_done() == 0, job.output()

    assert_bit_identical(job.final_states(), fsdp_baseline)
    ((detected, started, failed, restarted, completed, resumed),) = incidents(job).values()
    assert event_types([failed, restarted]) == ["migration.failed", "migration.started"]
    assert "died while receiving" in failed["data"]["reason"]
    assert detected["data"]["trigger"] == "unplanned" and detected["data"]["node"] == "a"
    for migration in (started, restarted):
        assert migration["data"]["state_source"] == "mirror"
        # Rank 1's buddy is rank 3 (rank + 2: the ranks per node), on node b.
        assert migration["data"]["source"] == {"node": "b", "rank": 3}
        assert migration["data"]["target"]["node"] == "c"
    assert completed["data"]["steps_lost"] == 0
    assert completed["data"]["verified"] is True
    assert completed["data"]["resumed_step"] == resumed["data"]["step"]
