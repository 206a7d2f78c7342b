"""Ingest throughput through a production server, and the cost of recomputing a year.

    .venv/bin/python bench/ingest.py            # writes bench/results/ingest.json

* events/s: gunicorn (2 sync workers, one per core) serving POST /api/v1/events into
  PostgreSQL, for batches of 1, 100 and 1,000 events, from 4 client threads. The fold into
  incidents is queued on Redis for the Celery worker, as in production; the worker's own rate
  is measured apart (`fold_incidents_per_s`).
* recompute_100k_s: recomputing the stored result of a contract year holding 100,000
  incidents (what every fold, expiry and close does for a year it touches).

Needs PostgreSQL and Redis on 127.0.0.1 (override with BENCH_DATABASE_URL, BENCH_REDIS_URL).
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/yoco_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
os.environ.update(DATABASE_URL=DATABASE_URL, CELERY_BROKER_URL=REDIS_URL,
                  DJANGO_SETTINGS_MODULE="yoco.settings",
                  SECRET_KEY=os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50))  # fmt: skip

from bench.common import write_result  # noqa: E402

TOTAL_EVENTS = {1: 3_000, 100: 30_000, 1000: 60_000}
CLIENT_THREADS = 4
PY = sys.executable


def manage(*args: str) -> str:
    return subprocess.run([PY, "manage.py", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def fresh_database() -> None:
    name = DATABASE_URL.rsplit("/", 1)[1]
    admin = DATABASE_URL.rsplit("/", 1)[0] + "/postgres"
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    manage("migrate", "-v0")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def event(cluster: str, n: int) -> dict:
    """Event n of a stream of 4-event incidents (detected, migration started/completed, resumed)."""
    base = {
        "specversion": "1.0",
        "id": str(uuid.uuid4()),
        "source": f"/clusters/{cluster}/jobs/j1",
        "time": f"2026-03-01T10:{(n // 60) % 60:02d}:{n % 60:02d}Z",
        "subject": f"inc-{n // 4}",
    }
    kind, data = [
        ("failure.detected", {"trigger": "unplanned", "category": "gpu_xid", "rank": 3}),
        ("migration.started", {"mode": "model_aware", "state_source": "replica", "bytes": 10**9}),
        ("migration.completed", {"steps_lost": 0, "duration_ms": 900, "bytes": 10**9}),
        ("job.resumed", {"step": 100, "downtime_ms": 1200}),
    ][n % 4]
    return {**base, "type": f"io.yoco.{kind}", "data": data}


def post_all(base_url: str, key: str, bodies: list[str]) -> float:
    """POST every body from CLIENT_THREADS threads; the wall time it took."""
    import threading

    import requests

    headers = {"Authorization": f"Bearer {key}",
               "Content-Type": "application/cloudevents-batch+json"}  # fmt: skip
    local = threading.local()

    def send(body: str) -> None:
        if not hasattr(local, "session"):
            local.session = requests.Session()
        response = local.session.post(
            f"{base_url}/api/v1/events", data=body, headers=headers, timeout=60
        )
        assert response.status_code == 200, response.text[:300]

    started = time.perf_counter()
    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        list(pool.map(send, bodies))
    return time.perf_counter() - started


def measure_ingest(base_url: str, key: str, cluster: str) -> dict[str, float]:
    rates = {}
    counter = 0
    for batch_size, total in TOTAL_EVENTS.items():
        bodies = []
        for _ in range(total // batch_size):
            bodies.append(json.dumps([event(cluster, counter + i) for i in range(batch_size)]))
            counter += batch_size
        elapsed = post_all(base_url, key, bodies)
        rates[str(batch_size)] = round(total / elapsed)
        print(f"batch {batch_size:>5}: {total} events in {elapsed:.2f} s "
              f"= {rates[str(batch_size)]:,} events/s")  # fmt: skip
    return rates


def measure_recompute(contract_id: int) -> dict[str, float]:
    import django

    django.setup()
    from yoco.guarantee.fold import fold
    from yoco.guarantee.models import Contract, Incident
    from yoco.guarantee.years import refresh_years

    contract = Contract.objects.get(pk=contract_id)
    cluster = contract.clusters.first()
    year = contract.contract_years.get(number=1)
    # The fold's own rate, on the incidents the ingest run stored (as the worker would).
    subjects = list(
        cluster.events.exclude(subject=None).values_list("subject", flat=True).distinct()[:5000]
    )
    started = time.perf_counter()
    fold(cluster, subjects, [f"/clusters/{cluster.name}/jobs/j1"])
    fold_rate = len(subjects) / (time.perf_counter() - started)
    print(f"fold: {len(subjects)} incidents at {fold_rate:,.0f} incidents/s")

    existing = Incident.objects.filter(contract=contract, year_number=1).count()
    outcomes = ["live_resolved"] * 90 + ["rolled_back"] * 4 + ["failed"] * 3 + ["excluded"] * 3
    Incident.objects.bulk_create(
        [
            Incident(
                cluster=cluster,
                subject=f"bulk-{n}",
                contract=contract,
                year_number=1,
                detected_at=year.start,
                deadline_at=year.start,
                trigger="unplanned",
                category="gpu_xid",
                scope="node",
                outcome=outcomes[n % 100],
                computed_outcome=outcomes[n % 100],
            )  # fmt: skip
            for n in range(100_000 - existing)
        ],
        batch_size=5000,
    )
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        refresh_years([(contract.pk, 1)])
        timings.append(time.perf_counter() - started)
    year.refresh_from_db()
    assert sum(year.counts.values()) == 100_000, year.counts
    print(f"recompute a year of 100,000 incidents: {min(timings):.3f} s (best of 5)")
    return {"recompute_100k_s": round(min(timings), 4), "fold_incidents_per_s": round(fold_rate)}


def main() -> None:
    fresh_database()
    subprocess.run([PY, "-m", "celery", "-A", "yoco", "purge", "-f"], cwd=ROOT, check=True,
                   capture_output=True)  # fmt: skip
    created = json.loads(manage("create_contract", "--customer", "Bench", "--start", "2026-01-01",
                                "--years", "1", "--annual-value", "1000000", "--currency", "USD",
                                "--cluster", "bench").strip().splitlines()[-1])  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        [Path(PY).parent / "gunicorn", "yoco.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2",
         "--log-level", "warning"],
        cwd=ROOT, start_new_session=True,
    )  # fmt: skip
    try:
        import requests

        for _ in range(100):
            try:
                requests.get(f"http://127.0.0.1:{port}/api/v1/incidents", timeout=2)
                break
            except requests.RequestException:
                time.sleep(0.1)
        rates = measure_ingest(
            f"http://127.0.0.1:{port}", created["cluster_keys"]["bench"], "bench"
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    figures = measure_recompute(created["contract"])
    subprocess.run([PY, "-m", "celery", "-A", "yoco", "purge", "-f"], cwd=ROOT,
                   capture_output=True)  # fmt: skip
    path = write_result(
        "ingest",
        {
            "events_per_s": rates,
            **figures,
            "targets": {"events_per_s_1000": 10_000, "recompute_100k_s": 1.0},
            "setup": f"gunicorn 2 sync workers, {CLIENT_THREADS} client threads, PostgreSQL, "
            "fold queued on Redis",
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
