"""The real platform (gunicorn, no broker: processing runs in the request) SIGKILLed in the middle
of ingest, three times, restarted each time; the client then retries every batch. Afterwards
every stored event is processed (0 pending, 0 quarantined), every subject has its incident,
nothing acknowledged before a kill is lost, and every year's counts equal a recount from the
stored events. Also: a body sent without a length (chunked) is a 411 from the real server."""

import json
import random
import threading
import time

import pytest
import requests

from tests.e2e.conftest import wait_until

# The marker sets up the test database (PostgreSQL with DATABASE_URL) before the platform
# fixture asks for it.
pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CLUSTER = "crash"
BATCHES = 12
INCIDENTS_PER_BATCH = 50
HEADERS = {"Content-Type": "application/cloudevents-batch+json"}

# Run in the platform's own Django (manage.py shell): what is stored, pending and counted, and
# the counts after every incident is recomputed from the stored events.
REPORT = """
import json
from yoco.guarantee.fold import fold
from yoco.events.models import Event
from yoco.guarantee.models import Incident
from yoco.guarantee.models import ContractYear
from yoco.guarantee.years import count_outcomes
events = Event.objects.filter(cluster__name="%s")
stored_subjects = set(events.exclude(subject=None).values_list("subject", flat=True))
detected = Incident.objects.filter(detected_at__isnull=False)
incidents = set(detected.values_list("subject", flat=True))
years = {y.pk: y.counts for y in ContractYear.objects.all()}
recount = {y.pk: count_outcomes(y.contract_id, y.number) for y in ContractYear.objects.all()}
if %s:
    for cluster in {e.cluster for e in events[:1]}:
        fold(cluster, stored_subjects, set(events.values_list("source", flat=True)))
refolded = {y.pk: y.counts for y in ContractYear.objects.all()}
print(json.dumps({
    "stored": sorted(events.values_list("event_id", flat=True)),
    "pending": events.pending().count(),
    "quarantined": events.filter(quarantined_at__isnull=False).count(),
    "without_incident": sorted(stored_subjects - incidents),
    "years": years, "recount": recount, "refolded": refolded,
}))
"""


def make_batches() -> list[list[dict]]:
    """Failures of year 1 (2026): most fixed live, every fifth rolled back."""
    batches = []
    for b in range(BATCHES):
        batch = []
        for i in range(INCIDENTS_PER_BATCH):
            subject = f"b{b}-i{i}"
            at = f"2026-{1 + b % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"
            base = {"specversion": "1.0", "source": f"/clusters/{CLUSTER}/jobs/j{b}",
                    "subject": subject, "time": at}  # fmt: skip
            batch.append({**base, "id": f"{subject}-d", "type": "io.yoco.failure.detected",
                          "data": {"trigger": "unplanned", "category": "gpu_xid"}})  # fmt: skip
            if i % 5 == 0:
                batch.append({**base, "id": f"{subject}-c", "type": "io.yoco.checkpoint.restored",
                              "data": {"steps_lost": 30}})  # fmt: skip
            else:
                batch.append({**base, "id": f"{subject}-m", "type": "io.yoco.migration.completed",
                              "data": {"steps_lost": 0, "duration_ms": 800}})  # fmt: skip
                batch.append({**base, "id": f"{subject}-r", "type": "io.yoco.job.resumed",
                              "data": {"step": 9, "downtime_ms": 800}})  # fmt: skip
        batches.append(batch)
    return batches


class Sender:
    """Two client threads posting batches (as two agents would) until the server dies."""

    def __init__(self, url: str, key: str):
        self.url, self.headers = (
            f"{url}/api/v1/events",
            {**HEADERS, "Authorization": f"Bearer {key}"},
        )
        self.acknowledged: set[str] = set()
        self.server_errors: list[str] = []

    def post(self, batch: list[dict]) -> requests.Response:
        return requests.post(self.url, data=json.dumps(batch), headers=self.headers, timeout=120)

    def send(self, batches: list[list[dict]]) -> None:
        for batch in batches:
            try:
                response = self.post(batch)
            except requests.RequestException:
                return  # the server died under this request
            if response.status_code >= 500:
                self.server_errors.append(response.text[:300])
                continue
            for result in response.json()["results"]:
                if result["status"] in ("accepted", "duplicate"):
                    self.acknowledged.add(result["id"])

    def run_until_killed(self, platform, batches, rng: random.Random) -> None:
        threads = [threading.Thread(target=self.send, args=(batches[k::2],)) for k in (0, 1)]
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(0.5, 2.5))
        platform.kill()
        for thread in threads:
            thread.join(timeout=180)


def report(platform, refold: bool = False) -> dict:
    out = platform.manage("shell", "-c", REPORT % (CLUSTER, refold))
    return json.loads(out.strip().splitlines()[-1])


def test_kill9_mid_ingest_then_retry_leaves_nothing_unprocessed(platform):
    created = platform.create_contract(CLUSTER)
    platform.start()
    sender = Sender(platform.url, created["cluster_keys"][CLUSTER])

    chunked = requests.post(sender.url, data=iter([b"[]"]), headers=sender.headers, timeout=30)
    assert chunked.status_code == 411, chunked.text

    batches = make_batches()
    rng = random.Random(11)
    for _ in range(3):
        sender.run_until_killed(platform, batches, rng)
        platform.start()
    assert sender.server_errors == []
    after_kills = report(platform)
    assert sender.acknowledged <= set(after_kills["stored"])  # nothing acknowledged lost

    for batch in batches:  # the client retries everything
        response = sender.post(batch)
        assert response.status_code == 200, response.text[:300]
    wait_until(lambda: report(platform)["pending"] == 0, 60, "every stored event processed")

    final = report(platform, refold=True)
    every_id = {event["id"] for batch in batches for event in batch}
    assert set(final["stored"]) == every_id and len(final["stored"]) == len(every_id)
    assert final["quarantined"] == 0
    assert final["without_incident"] == []
    assert final["years"] == final["recount"] == final["refolded"]
    counts = final["years"][min(final["years"])]
    assert counts["rolled_back"] == BATCHES * INCIDENTS_PER_BATCH // 5
    assert counts["live_resolved"] == BATCHES * INCIDENTS_PER_BATCH * 4 // 5
