"""Every stored event is processed eventually (SPEC 3): what a crash left pending is found by the
sweep (the command, the next ingest, a duplicate's retry, the beat task); an event that cannot be
processed is quarantined with its reason and blocks neither its batch nor its subject;
processing twice changes nothing."""

from django.conf import settings
from django.core.management import call_command
from django.test import Client

from tests.conftest import cloud_event, post_events
from tests.platform.account_team import staff
from tests.platform.hostile import assert_kept_and_processed, good_incident
from yoco.events.ingest import ingest_events
from yoco.events.models import Event
from yoco.guarantee.models import ContractYear, Incident
from yoco.guarantee.years import count_outcomes


def stored_then_crashed(acme, events):
    """Events stored by an ingest whose processing never ran (its on-commit work is dropped, as
    a kill -9 right after the commit would drop it)."""
    result = ingest_events(acme.contract.clusters.get(), events)
    assert result.all_stored
    assert Event.objects.pending().count() >= len(events)


def assert_years_match_a_recount():
    for year in ContractYear.objects.all():
        assert year.counts == count_outcomes(year.contract_id, year.number), year


def test_the_command_processes_what_a_crash_left(acme):
    events = good_incident() + good_incident()
    stored_then_crashed(acme, events)
    assert Incident.objects.count() == 0
    call_command("process_pending", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert Event.objects.pending().count() == 0
    assert_kept_and_processed(events)
    assert_years_match_a_recount()
    assert ContractYear.objects.get(number=1).counts["live_resolved"] == 2


def test_a_retry_answered_duplicate_processes_them(acme, api):
    events = good_incident()
    stored_then_crashed(acme, events)
    response = post_events(api, acme.cluster_keys["east"], events)
    assert response.status_code == 200
    assert response.json()["duplicate"] == 3
    assert_kept_and_processed(events)
    assert_years_match_a_recount()


def test_the_next_ingest_sweeps_the_backlog(acme, api):
    left = good_incident()
    stored_then_crashed(acme, left)
    later = good_incident()
    assert post_events(api, acme.cluster_keys["east"], later).status_code == 200
    assert_kept_and_processed(left + later)
    assert_years_match_a_recount()


def test_the_beat_task_sweeps(acme):
    from yoco.guarantee.tasks import process_pending_task

    events = good_incident()
    stored_then_crashed(acme, events)
    assert process_pending_task.delay().get() == 3
    assert_kept_and_processed(events)
    schedule = {e["task"]: e["schedule"] for e in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule["yoco.guarantee.tasks.process_pending_task"] <= 60


def _poison(acme, subject: str) -> Event:
    """A stored event that cannot be processed: a migration.completed without `steps_lost`, as
    an earlier, laxer version could have stored it."""
    event = cloud_event("migration.completed", subject=subject, duration_ms=5)
    valid = {**event, "data": {"steps_lost": 0, "duration_ms": 5}}
    stored = ingest_events(acme.contract.clusters.get(), [valid])
    assert stored.all_stored
    row = Event.objects.get(event_id=event["id"])
    row.raw = event  # steps_lost gone
    row.save(update_fields=["raw"])
    return row


def test_unprocessable_event_is_quarantined_and_blocks_nothing(acme, api):
    batch = good_incident() + good_incident()
    subject = batch[0]["subject"]
    poison = _poison(acme, subject)  # pending, in the same subject as good events
    response = post_events(api, acme.cluster_keys["east"], batch)
    assert response.status_code == 200
    assert_kept_and_processed(batch)
    poison.refresh_from_db()
    assert poison.processed_at is None and poison.quarantined_at is not None
    assert "steps_lost" in poison.quarantine_reason
    assert Event.objects.pending().count() == 0
    # Later events of its subject are processed, the quarantined one left out.
    finished = cloud_event("job.finished", status="completed")
    later = cloud_event("checkpoint.restored", subject=subject, steps_lost=4)
    assert post_events(api, acme.cluster_keys["east"], [finished, later]).status_code == 200
    assert_kept_and_processed([finished, later])
    assert Incident.objects.get(subject=subject).outcome == "rolled_back"
    assert_years_match_a_recount()


def test_quarantine_is_visible_in_the_admin(acme, api):
    detected = good_incident()[:1]
    assert post_events(api, acme.cluster_keys["east"], detected).status_code == 200
    poison = _poison(acme, detected[0]["subject"])
    call_command("process_pending", stdout=open("/dev/null", "w"))  # noqa: SIM115
    client = Client()
    client.force_login(staff("ops"))
    listing = client.get("/admin/events/event/?processing=quarantined").content.decode()
    assert poison.event_id in listing
    page = client.get(f"/admin/events/event/{poison.pk}/change/").content.decode()
    assert "KeyError" in page and "steps_lost" in page
    history = client.get("/admin/accounts/auditrecord/").content.decode()
    assert "quarantine_event" in history


def test_processing_again_changes_nothing(acme, api):
    events = good_incident() + good_incident() + [cloud_event("job.started",
                                                               framework="pytorch",
                                                               world_size=8, gpus=8)]  # fmt: skip
    post_events(api, acme.cluster_keys["east"], events)
    fields = ["subject", "outcome", "detected_at", "downtime_ms", "gpus", "contract_id"]
    before = list(Incident.objects.order_by("subject").values(*fields))
    counts = list(ContractYear.objects.order_by("pk").values_list("counts", flat=True))
    Event.objects.update(processed_at=None)  # as if every one were still pending
    call_command("process_pending", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert list(Incident.objects.order_by("subject").values(*fields)) == before
    assert list(ContractYear.objects.order_by("pk").values_list("counts", flat=True)) == counts
    # A retry of the whole batch is all duplicates and changes nothing either.
    response = post_events(api, acme.cluster_keys["east"], events)
    assert response.json()["duplicate"] == len(events)
    assert list(Incident.objects.order_by("subject").values(*fields)) == before
