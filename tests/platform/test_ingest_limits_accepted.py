"""What SPEC 3 admits at its edges is stored and processed without error: integers up to
2^53 - 1 in every column they reach, times in the years 0001 and 9999, ids of 200 characters,
sources of 300, the `fail_slow` category and the new optional fields."""

from django.test import Client

from tests.conftest import cloud_event, post_events
from tests.platform.account_team import customer_user
from tests.platform.hostile import assert_kept_and_processed
from yoco.guarantee.models import Incident, Job

MAX = 2**53 - 1


def test_largest_integers_fit_every_column(acme, api):
    events = [
        cloud_event("job.started", framework="pytorch", world_size=MAX, gpus=MAX, spares=MAX,
                    parallelism={"dp_replicate": MAX, "tp": 1}, model="m" * 5000),
        cloud_event("failure.detected", subject="max", trigger="unplanned", category="gpu_xid",
                    rank=MAX, step=MAX, xid=MAX, device=MAX),
        cloud_event("migration.started", subject="max", mode="transparent",
                    state_source="mirror", bytes=MAX, source={"node": "a", "rank": MAX}),
        cloud_event("migration.completed", subject="max", steps_lost=0, duration_ms=MAX,
                    bytes=MAX, recompute_ms=MAX, resumed_step=MAX, verified=True),
        cloud_event("job.resumed", subject="max", step=MAX, downtime_ms=MAX),
        cloud_event("job.finished", status="completed", step=MAX, extra=-MAX),
    ]  # fmt: skip
    response = post_events(api, acme.cluster_keys["east"], events)
    assert response.status_code == 200, response.json()
    assert_kept_and_processed(events)
    job = Job.objects.get()
    assert (job.world_size, job.gpus, len(job.model)) == (MAX, MAX, 5000)
    incident = Incident.objects.get(subject="max")
    assert (incident.gpus, incident.downtime_ms) == (MAX, MAX)
    # The portal's sums and products of these columns, and the read API, answer too.
    client = Client()
    client.force_login(customer_user("ada", acme.contract.customer))
    for page in ("/", f"/contracts/{acme.contract.pk}/", f"/incidents/{incident.pk}/",
                 "/incidents/", "/incidents.csv", "/years.csv"):  # fmt: skip
        assert client.get(page).status_code == 200, page
    read = {"HTTP_AUTHORIZATION": f"Bearer {acme.read_token}"}
    assert api.get("/api/v1/incidents", **read).status_code == 200
    assert api.get(f"/api/v1/contracts/{acme.contract.pk}/years", **read).status_code == 200


def test_longest_id_subject_and_source(acme, api):
    event = cloud_event("failure.detected", job="j" * 280, subject="s" * 200,
                        trigger="unplanned", category="power")  # fmt: skip
    event["id"] = "i" * 200
    assert len(event["source"]) == 300
    response = post_events(api, acme.cluster_keys["east"], [event])
    assert response.status_code == 200, response.json()
    assert_kept_and_processed([event])


def test_first_and_last_instants(acme, api):
    events = [
        cloud_event("failure.detected", subject="first", time="0001-01-01T00:00:00Z",
                    trigger="unplanned", category="gpu_xid"),
        cloud_event("failure.detected", subject="early", time="0001-01-01T00:59:59-00:59",
                    trigger="unplanned", category="gpu_xid"),
        cloud_event("failure.detected", subject="last", time="9999-12-31T23:59:59.999999Z",
                    trigger="unplanned", category="gpu_xid"),
        cloud_event("failure.detected", subject="late", time="9999-12-31T22:59:59-01:00",
                    trigger="unplanned", category="gpu_xid"),
    ]  # fmt: skip
    response = post_events(api, acme.cluster_keys["east"], events)
    assert response.status_code == 200, response.json()
    assert_kept_and_processed(events)
    assert Incident.objects.get(subject="last").detected_at.year == 9999
    client = Client()
    client.force_login(customer_user("ada", acme.contract.customer))
    for incident in Incident.objects.all():
        assert client.get(f"/incidents/{incident.pk}/").status_code == 200
    assert client.get("/incidents/").status_code == 200
    read = {"HTTP_AUTHORIZATION": f"Bearer {acme.read_token}"}
    assert api.get("/api/v1/incidents", **read).status_code == 200


def test_fail_slow_is_a_category(acme, api):
    event = cloud_event("failure.detected", subject="slow", trigger="preemptive",
                        category="fail_slow")  # fmt: skip
    response = post_events(api, acme.cluster_keys["east"], [event])
    assert response.status_code == 200, response.json()
    assert Incident.objects.get(subject="slow").category == "fail_slow"


def test_new_optional_fields_accepted(acme, api):
    events = [
        cloud_event("job.started", framework="torchtitan", world_size=16, spares=2,
                    parallelism={"dp_replicate": 2, "dp_shard": 4, "tp": 2}),
        cloud_event("migration.started", subject="n", mode="model_aware", state_source="replica",
                    spare="reclaimed"),
        cloud_event("migration.completed", subject="n", steps_lost=0, duration_ms=10,
                    verified=False),
    ]  # fmt: skip
    response = post_events(api, acme.cluster_keys["east"], events)
    assert response.status_code == 200, response.json()
