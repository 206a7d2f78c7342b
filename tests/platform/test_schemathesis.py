"""schemathesis against the platform under gunicorn, with each kind of key: no answer may be a
5xx, and every answer must be one the OpenAPI schema documents (status code, content type,
headers and body). Deterministic generation (the same cases every run), a few hundred cases in
all. The database is seeded with a customer, a contract with incidents and credits, its
cluster key and read token, and a billing token."""

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import cloud_event
from tests.e2e.conftest import Platform, server_database_url

# django_db: so that pytest-django sets up the run's test database, which the server uses.
pytestmark = [pytest.mark.integration, pytest.mark.django_db]

SCHEMATHESIS = Path(os.environ.get("VIRTUAL_ENV", Path(__file__).parents[2] / ".venv"))
CLUSTER = "schemathesis"
# What fails the build: a 5xx, or an answer the schema does not document.
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
]
READS = ["/api/v1/incidents", "/api/v1/contracts/{contract_id}/years"]
BILLING = ["/api/v1/billing/credits", "/api/v1/billing/credits/{credit_id}/ack"]
# kind of key → (the paths it is for, phases, fuzzed cases per operation). Each kind runs
# the boundary and negative cases of its own endpoints (the coverage phase) and some random
# ones; without a key every endpoint must answer a documented 401.
FULL = "examples,coverage,fuzzing"
RUNS = {
    "cluster": (["/api/v1/events"], FULL, 40),
    "read": (READS, FULL, 25),
    "billing": (BILLING, FULL, 25),
    "none": (["/api/v1/events", *READS, *BILLING], "fuzzing", 5),
}


def _incident(subject, detected, outcome_events):
    failure = cloud_event("failure.detected", cluster=CLUSTER, subject=subject, time=detected,
                          trigger="unplanned", category="gpu_xid")  # fmt: skip
    return [failure, *outcome_events]


def _seed_events() -> list[dict]:
    """A live-resolved and a rolled-back incident in year 1 (a missed year: a credit)."""
    live = [
        cloud_event("migration.completed", cluster=CLUSTER, subject="s-live",
                    time="2026-03-01T10:00:05Z", steps_lost=0, duration_ms=900),
        cloud_event("job.resumed", cluster=CLUSTER, subject="s-live",
                    time="2026-03-01T10:00:06Z", step=11, downtime_ms=1000),
    ]  # fmt: skip
    rolled = [
        cloud_event("checkpoint.restored", cluster=CLUSTER, subject="s-ckpt",
                    time="2026-04-01T10:01:00Z", steps_lost=40, checkpoint_step=60),
        cloud_event("job.resumed", cluster=CLUSTER, subject="s-ckpt",
                    time="2026-04-01T10:02:00Z", step=61),
    ]  # fmt: skip
    started = cloud_event("job.started", cluster=CLUSTER, framework="pytorch", world_size=8)
    return [
        started,
        *_incident("s-live", "2026-03-01T10:00:00Z", live),
        *_incident("s-ckpt", "2026-04-01T10:00:00Z", rolled),
    ]


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    """gunicorn on the run's test database (PostgreSQL in CI) or a fresh SQLite file, seeded
    through the operators' commands and the API; emptied afterwards."""
    tmp = tmp_path_factory.mktemp("schemathesis")
    on_postgres = bool(os.environ.get("DATABASE_URL"))
    with django_db_blocker.unblock():
        platform = Platform(tmp, server_database_url() if on_postgres else None)
        if not on_postgres:
            platform.manage("migrate", "-v0")
        try:
            created = platform.create_contract(CLUSTER)
            billing = json.loads(platform.manage("create_billing_token").strip().splitlines()[-1])
            platform.start()
            answer = requests.post(
                f"{platform.url}/api/v1/events",
                data=json.dumps(_seed_events()),
                headers={
                    "Authorization": f"Bearer {created['cluster_keys'][CLUSTER]}",
                    "Content-Type": "application/cloudevents-batch+json",
                },
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            platform.manage("close_years", "--now", "2027-03-01T00:00:00Z")
            yield (
                platform,
                {
                    "cluster": created["cluster_keys"][CLUSTER],
                    "read": created["read_token"],
                    "billing": billing["billing_token"],
                    "contract": created["contract"],
                },
            )
        finally:
            platform.stop()
            if on_postgres:
                from django.core.management import call_command

                call_command("flush", interactive=False, verbosity=0)


def run_schemathesis(platform: Platform, kind: str, keys: dict, tmp_path: Path):
    paths, phases, examples = RUNS[kind]
    config = tmp_path / "schemathesis.toml"
    # The seeded contract, so that the years endpoint is tested past its 404.
    config.write_text(
        "[[operations]]\n"
        'include-path = "/api/v1/contracts/{contract_id}/years"\n'
        f"parameters = {{ contract_id = {keys['contract']} }}\n"
    )
    command = [
        str(SCHEMATHESIS / "bin" / "schemathesis"), "--config-file", str(config), "--no-color",
        "run", f"{platform.url}/api/v1/schema",
        "--checks", ",".join(CHECKS),
        "--phases", phases,
        "--generation-deterministic",  # the same cases every run: a fixed seed
        "--max-examples", str(examples),
        "--workers", "1",
        "--request-timeout", "30",
        *(arg for path in paths for arg in ("--include-path", path)),
    ]  # fmt: skip
    if kind != "none":
        command += ["--header", f"Authorization: Bearer {keys[kind]}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("kind", list(RUNS))
def test_every_answer_is_documented_and_none_is_a_5xx(server, kind, tmp_path):
    platform, keys = server
    started = time.monotonic()
    code, output = run_schemathesis(platform, kind, keys, tmp_path)
    counts = re.search(r"Test cases:\s*\n\s*(.+)", output)
    took = time.monotonic() - started
    print(f"schemathesis, {kind} key: {counts.group(1) if counts else 'no counts'} ({took:.0f} s)")
    assert code == 0, output[-6000:]
    assert counts and "generated" in counts.group(1), output[-3000:]
