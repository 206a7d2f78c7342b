"""Ingest through a real gunicorn server, folded by a real Celery worker over Redis, into a
real PostgreSQL: what the posted events say shows in /years once the worker has run."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from django.db import connection

from tests.conftest import cloud_event

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("YOCO_TEST_REDIS_URL")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not REDIS_URL, reason="set YOCO_TEST_REDIS_URL (CI does) for Redis"),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor != "postgresql":
        pytest.skip("the worker integration test runs on PostgreSQL (set DATABASE_URL)")
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def platform_processes(transactional_db):
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "yoco.settings",
    }
    subprocess.run([sys.executable, "-m", "celery", "-A", "yoco", "purge", "-f"], env=env,
                   cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    port = _free_port()
    bindir = Path(sys.executable).parent
    server = subprocess.Popen(
        [bindir / "gunicorn", "yoco.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2"],
        env=env, cwd=ROOT, start_new_session=True,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "yoco", "worker", "--pool", "solo",
         "--loglevel", "WARNING"],
        env=env, cwd=ROOT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                requests.get(f"{base}/api/v1/incidents", timeout=2)  # 401 once up
                break
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.1)
        yield base
    finally:
        for process in (server, worker):
            os.killpg(process.pid, signal.SIGTERM)
        for process in (server, worker):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def test_events_folded_by_a_real_worker(acme, platform_processes):
    base = platform_processes
    events = [
        cloud_event("job.started", framework="pytorch", world_size=8, gpus=8),
        cloud_event("failure.detected", subject="w1", time="2026-02-01T00:00:00Z",
                    trigger="unplanned", category="gpu_xid"),
        cloud_event("migration.completed", subject="w1", time="2026-02-01T00:02:00Z",
                    steps_lost=0, duration_ms=2000),
        cloud_event("job.resumed", subject="w1", time="2026-02-01T00:02:00Z", step=7),
        cloud_event("failure.detected", subject="w2", time="2026-02-02T00:00:00Z",
                    trigger="unplanned", category="power"),
        cloud_event("checkpoint.restored", subject="w2", time="2026-02-02T00:09:00Z",
                    steps_lost=40),
    ]  # fmt: skip
    headers = {"Authorization": f"Bearer {acme.cluster_keys['east']}",
               "Content-Type": "application/cloudevents-batch+json"}  # fmt: skip
    import json

    response = requests.post(f"{base}/api/v1/events", data=json.dumps(events), headers=headers,
                             timeout=10)  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 6

    read = {"Authorization": f"Bearer {acme.read_token}"}
    deadline = time.monotonic() + 60
    counts = None
    while time.monotonic() < deadline:
        years = requests.get(f"{base}/api/v1/contracts/{acme.contract.pk}/years", headers=read,
                             timeout=10).json()  # fmt: skip
        counts = years["years"][0]["counts"]
        if counts["live_resolved"] + counts["rolled_back"] == 2:
            break
        time.sleep(0.2)
    assert counts["live_resolved"] == 1 and counts["rolled_back"] == 1
