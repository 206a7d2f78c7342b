"""GET /api/v1/contracts/{id}/years reflects accepted events at once (eager processing)."""

from tests.conftest import cloud_event, post_events


def _incident(subject, *, detected, resumed=None, steps_lost=0, category="gpu_xid", **extra):
    events = [
        cloud_event(
            "failure.detected", subject=subject, time=detected, trigger="unplanned",
            category=category, **extra,
        )
    ]  # fmt: skip
    if resumed:
        events.append(
            cloud_event(
                "migration.completed",
                subject=subject,
                time=resumed,
                steps_lost=steps_lost,
                duration_ms=1200,
            )  # fmt: skip
        )
        events.append(cloud_event("job.resumed", subject=subject, time=resumed, step=5))
    return events


def _years(api, acme):
    response = api.get(
        f"/api/v1/contracts/{acme.contract.pk}/years",
        HTTP_AUTHORIZATION=f"Bearer {acme.read_token}",
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_years_shape_and_counts(acme, api):
    events = (
        _incident("a", detected="2026-02-01T10:00:00Z", resumed="2026-02-01T10:05:00Z")
        + _incident(
            "b", detected="2026-02-02T10:00:00Z", resumed="2026-02-02T10:05:00Z", steps_lost=3
        )  # fmt: skip
        + _incident("c", detected="2026-02-03T10:00:00Z", category="sdc")
        + _incident("d", detected="2027-02-03T10:00:00Z")  # year 2, failed by now
    )
    assert post_events(api, acme.cluster_keys["east"], events).status_code == 200
    body = _years(api, acme)
    assert body["contract"] == acme.contract.pk
    first, second = body["years"]
    assert first["number"] == 1
    assert first["start"] == "2026-01-01T00:00:00Z" and first["end"] == "2027-01-01T00:00:00Z"
    assert first["state"] == "open"
    assert first["counts"] == {
        "live_resolved": 1, "rolled_back": 1, "failed": 0, "pending": 0, "excluded": 1,
        "planned": 0,
    }  # fmt: skip
    assert first["eligible"] == 2
    assert first["compliance"] == "0.5000"
    assert first["meets"] is False
    assert first["credit"] is None
    assert second["counts"]["pending"] + second["counts"]["failed"] == 1


def test_outcome_independent_of_arrival_order(acme, api):
    resumed_first = list(reversed(_incident("x", detected="2026-05-01T00:00:00Z",
                                            resumed="2026-05-01T00:03:00Z")))  # fmt: skip
    key = acme.cluster_keys["east"]
    for event in resumed_first:  # one request each, the detection last
        post_events(api, key, event, single=True)
    assert _years(api, acme)["years"][0]["counts"]["live_resolved"] == 1


def test_recovery_without_detection_counts_nowhere_until_it_arrives(acme, api):
    key = acme.cluster_keys["east"]
    detect, *recovery = _incident("y", detected="2026-05-01T00:00:00Z",
                                  resumed="2026-05-01T00:03:00Z")  # fmt: skip
    post_events(api, key, recovery)
    assert sum(_years(api, acme)["years"][0]["counts"].values()) == 0
    listed = api.get("/api/v1/incidents", HTTP_AUTHORIZATION=f"Bearer {acme.read_token}").json()
    assert listed["count"] == 1
    assert listed["results"][0]["outcome"] is None
    assert listed["results"][0]["detected_at"] is None
    post_events(api, key, [detect])
    assert _years(api, acme)["years"][0]["counts"]["live_resolved"] == 1


def test_late_job_started_with_unsupported_framework_excludes(contract_factory, api):
    acme = contract_factory(frameworks=["torchtitan"])
    key = acme.cluster_keys["east"]
    post_events(api, key, _incident("z", detected="2026-05-01T00:00:00Z"))
    post_events(api, key, [cloud_event("job.started", framework="deepspeed", world_size=8)])
    assert _years(api, acme)["years"][0]["counts"]["excluded"] == 1


def test_another_customers_contract_is_404(acme, outsider, api):
    response = api.get(
        f"/api/v1/contracts/{outsider.contract.pk}/years",
        HTTP_AUTHORIZATION=f"Bearer {acme.read_token}",
    )
    assert response.status_code == 404


def test_years_need_a_read_token(acme, api):
    url = f"/api/v1/contracts/{acme.contract.pk}/years"
    assert api.get(url).status_code == 401
    assert api.get(url, HTTP_AUTHORIZATION="Bearer bad.key").status_code == 401
    ingest = acme.cluster_keys["east"]
    assert api.get(url, HTTP_AUTHORIZATION=f"Bearer {ingest}").status_code == 403
