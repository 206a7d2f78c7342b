"""Events stored but never handed to a worker (the process died between the commit and the
enqueue) are processed by the periodic sweep: a real Celery beat and worker over Redis, a real
PostgreSQL, within 60 s."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from tests.platform.hostile import good_incident
from yoco.events.ingest import canonical_json, content_hash
from yoco.events.models import Event
from yoco.events.schema import parse_event
from yoco.guarantee.models import Incident

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("YOCO_TEST_REDIS_URL")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not REDIS_URL, reason="set YOCO_TEST_REDIS_URL (CI does) for Redis"),
]


@pytest.fixture
def worker_and_beat(transactional_db, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("the beat integration test runs on PostgreSQL (set DATABASE_URL)")
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "yoco.settings",
    }
    celery = [sys.executable, "-m", "celery", "-A", "yoco"]
    subprocess.run([*celery, "purge", "-f"], env=env, cwd=ROOT, check=True, capture_output=True)
    processes = [
        subprocess.Popen([*celery, "worker", "--pool", "solo", "--loglevel", "WARNING"],
                         env=env, cwd=ROOT, start_new_session=True),
        subprocess.Popen([*celery, "beat", "--loglevel", "WARNING", "--schedule",
                          str(tmp_path / "beat-schedule")],
                         env=env, cwd=ROOT, start_new_session=True),
    ]  # fmt: skip
    yield
    for process in processes:
        os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def store_without_processing(cluster, events) -> None:
    """The rows an ingest commits, with no task ever queued for them."""
    now = timezone.now()
    rows = []
    for raw in events:
        parsed, text = parse_event(raw), canonical_json(raw)
        rows.append(Event(cluster=cluster, source=parsed.source, event_id=parsed.id,
                          type=parsed.type, time=parsed.time, subject=parsed.subject, raw=raw,
                          content_hash=content_hash(text), received_at=now))  # fmt: skip
    Event.objects.bulk_create(rows)


def test_beat_processes_events_no_task_was_queued_for(acme, worker_and_beat):
    events = good_incident() + good_incident()
    store_without_processing(acme.contract.clusters.get(), events)
    assert Event.objects.pending().count() == len(events)
    deadline = time.monotonic() + 90  # the first beat run comes 30 s after beat starts
    while Event.objects.pending().exists() and time.monotonic() < deadline:
        time.sleep(1)
    assert Event.objects.pending().count() == 0
    assert Incident.objects.filter(detected_at__isnull=False).count() == 2
    year = acme.contract.contract_years.get(number=1)
    assert year.counts["live_resolved"] == 2
