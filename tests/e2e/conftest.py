"""End-to-end helpers: a stand-in platform (a real HTTP server on a real socket, for the spool's
tests) and the real platform under gunicorn (for the agent-to-platform tests)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakePlatform:
    """`POST /api/v1/events` as SPEC 3 answers it, de-duplicating by source+id, on a port that
    can be closed (down) and opened again (up). `mode` = "ok" | "5xx" | "slow"; ids listed in
    `reject` are answered `rejected`."""

    def __init__(self, key: str = "test-key"):
        self.key = key
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stored: dict[tuple[str, str], dict] = {}
        self.requests = 0
        self.posts_per_id: dict[str, int] = {}
        self.mode = "ok"
        self.reject: set[str] = set()
        self._server: ThreadingHTTPServer | None = None

    def up(self) -> None:
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                platform.requests += 1
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if platform.mode == "5xx":
                    return self._answer(503, {"detail": "unavailable"})
                if platform.mode == "slow":
                    time.sleep(3)
                if self.headers.get("Authorization") != f"Bearer {platform.key}":
                    return self._answer(401, {"detail": "bad key"})
                assert self.headers["Content-Type"] == "application/cloudevents-batch+json"
                results = []
                for index, event in enumerate(json.loads(body)):
                    platform.posts_per_id[event["id"]] = (
                        platform.posts_per_id.get(event["id"], 0) + 1
                    )
                    key = (event["source"], event["id"])
                    if event["id"] in platform.reject:
                        status, error = "rejected", "data.trigger: 'sideways' is not allowed"
                    elif key in platform.stored:
                        same = platform.stored[key] == event
                        status, error = ("duplicate" if same else "conflict"), None
                    else:
                        platform.stored[key] = event
                        status, error = "accepted", None
                    results.append({"index": index, "id": event["id"], "status": status,
                                    "error": error})  # fmt: skip
                ok = all(r["status"] in ("accepted", "duplicate") for r in results)
                self._answer(200 if ok else 207, {"results": results})

            def _answer(self, code, payload):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@pytest.fixture
def fake_platform():
    platform = FakePlatform()
    yield platform
    platform.down()


def event(n: int, source: str = "/clusters/ci/jobs/spool") -> dict:
    return {
        "specversion": "1.0",
        "id": f"evt-{n}",
        "source": source,
        "type": "io.yoco.job.started",
        "time": "2026-03-01T10:00:00.000000+00:00",
        "data": {"framework": "pytorch", "world_size": 2, "n": n},
    }


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# -- the real platform -------------------------------------------------------------------------


class Platform:
    """The Django platform under gunicorn on its own SQLite file (or the test run's PostgreSQL
    when DATABASE_URL is set), in its own session so SIGKILL takes the whole server."""

    def __init__(self, tmp: Path, database: str | None = None):
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        database = database or f"sqlite:///{tmp / 'platform.sqlite3'}"
        self.env = {
            **os.environ,
            "DATABASE_URL": database,
            "DJANGO_SETTINGS_MODULE": "yoco.settings",
            "PYTHONPATH": str(ROOT),
        }
        self.env.pop("CELERY_BROKER_URL", None)  # Celery eager: the fold runs in the request
        self.process: subprocess.Popen | None = None
        self.log = open(tmp / "gunicorn.log", "ab")  # noqa: SIM115 - closed in stop()

    def manage(self, *args: str) -> str:
        result = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=self.env,
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def create_contract(self, cluster: str) -> dict:
        out = self.manage("create_contract", "--customer", f"E2E {cluster}", "--start",
                          "2026-01-01", "--years", "2", "--annual-value", "1000000.00",
                          "--currency", "USD", "--cluster", cluster)  # fmt: skip
        return json.loads(out.strip().splitlines()[-1])

    def start(self) -> None:
        gunicorn = Path(PYTHON).parent / "gunicorn"
        self.process = subprocess.Popen(
            [str(gunicorn), "yoco.wsgi", "-b", f"127.0.0.1:{self.port}", "-w", "2",
             "--timeout", "60"],
            cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        wait_until(self._answers, 60, "gunicorn to answer")

    def _answers(self) -> bool:
        try:
            requests.get(f"{self.url}/api/v1/incidents", timeout=2)
            return True
        except requests.RequestException:
            return False

    def kill(self) -> None:
        """SIGKILL the whole server (master and workers), as a crash would."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()

    def get(self, path: str, token: str) -> dict:
        response = requests.get(f"{self.url}{path}", headers={"Authorization": f"Bearer {token}"},
                                timeout=30)  # fmt: skip
        assert response.status_code == 200, response.text
        return response.json()

    def incidents(self, contract: int, token: str) -> list[dict]:
        results, url = [], f"/api/v1/incidents?contract={contract}"
        while url:
            page = self.get(url, token)
            results += page["results"]
            url = page["next"] and page["next"].replace(self.url, "")
        return results


def server_database_url() -> str:
    """pytest-django's test database (PostgreSQL in CI), for the server processes."""
    from django.db import connection

    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def platform(transactional_db, tmp_path):
    """On SQLite (the default) a fresh file database migrated here; with DATABASE_URL set, the
    run's own test database (migrated by pytest-django, emptied after the test). Requested by
    name: pytest-django picks a transactional test case only for fixtures it sees up front."""
    if os.environ.get("DATABASE_URL"):
        platform = Platform(tmp_path, server_database_url())
    else:
        platform = Platform(tmp_path)
        platform.manage("migrate", "-v0")
    yield platform
    platform.stop()


def stored_events(platform: Platform, cluster: str) -> list[dict]:
    """Every event row the platform stored for a cluster (straight from its database)."""
    code = (
        "import json; from yoco.events.models import Event; print(json.dumps(list("
        f"Event.objects.filter(source__startswith='/clusters/{cluster}/')"
        ".values('source', 'event_id', 'type', 'raw'))))"
    )
    return json.loads(platform.manage("shell", "-c", code).strip().splitlines()[-1])


def agent_job(start_job, name: str, platform_url: str, key: str, cluster: str, *, spares: int,
              steps: int, tmp: Path, extra=()):  # fmt: skip
    """A real `yoco-agent run` (tests/agent's launcher helper) reporting to `platform_url`
    through its spool, with a local JSONL record of every event it emitted."""
    from tests.agent.conftest import GPT_ARGS

    script = [a for a in GPT_ARGS]
    script[script.index("--steps") + 1] = str(steps)
    return start_job(
        name, workers=2, spares=spares,
        extra=["--cluster", cluster, "--platform", platform_url, "--cluster-key", key,
               "--spool", str(tmp / f"{name}-spool.sqlite3"), "--checkpoint-dir",
               str(tmp / f"{name}-ckpt"), "--checkpoint-every", "10", *extra],
        script_args=[*script, "--step-sleep", "0.1"],
    )  # fmt: skip


def wait_spares_ready(job, n: int) -> None:
    """Spares build their model too: a failure before they are ready finds no spare."""
    job.wait_for(
        lambda: (
            sum(m["role"] == "spare" and m.get("ready") for m in job.status().get("members", []))
            >= n
        ),
        120,
        f"{n} spares ready",
    )
