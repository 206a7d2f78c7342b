"""GET /api/v1/incidents: shape, filters, scoping."""

from tests.conftest import cloud_event, post_events


def _detect(subject, time, cluster="east", **data):
    data.setdefault("trigger", "unplanned")
    data.setdefault("category", "gpu_ecc")
    return cloud_event("failure.detected", cluster=cluster, subject=subject, time=time, **data)


def _get(api, token, query=""):
    return api.get(f"/api/v1/incidents{query}", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_incident_shape(acme, api):
    event = _detect("inc-1", "2026-04-01T08:00:00+02:00")
    post_events(api, acme.cluster_keys["east"], [event])
    body = _get(api, acme.read_token).json()
    assert body["count"] == 1 and body["next"] is None and body["previous"] is None
    incident = body["results"][0]
    assert incident["contract"] == acme.contract.pk
    assert incident["cluster"] == "east"
    assert incident["subject"] == "inc-1"
    assert incident["detected_at"] == "2026-04-01T06:00:00Z"
    assert incident["trigger"] == "unplanned" and incident["category"] == "gpu_ecc"
    assert incident["outcome"] == "failed"
    assert incident["events"] == [event]


def test_filters(acme, api):
    key = acme.cluster_keys["east"]
    post_events(
        api,
        key,
        [
            _detect("a", "2026-04-01T00:00:00Z"),
            _detect("b", "2027-04-01T00:00:00Z", trigger="planned", category="maintenance"),
        ],
    )
    token = acme.read_token
    assert [i["subject"] for i in _get(api, token, "?year=1").json()["results"]] == ["a"]
    assert [i["subject"] for i in _get(api, token, "?outcome=planned").json()["results"]] == ["b"]
    query = f"?contract={acme.contract.pk}&year=2&outcome=planned"
    assert _get(api, token, query).json()["count"] == 1
    assert _get(api, token, "?outcome=bogus").status_code == 400
    assert _get(api, token, "?year=one").status_code == 400
    for bad in ("?contract=1.5", "?contract=--1", f"?contract={2**63}", "?year=\u0661"):
        response = _get(api, token, bad)  # not a number, or past the database's integers
        assert response.status_code == 400 and list(response.json()) == ["detail"], bad


def test_only_own_customers_incidents(acme, outsider, api):
    post_events(api, acme.cluster_keys["east"], [_detect("mine", "2026-04-01T00:00:00Z")])
    post_events(
        api, outsider.cluster_keys["north"], [_detect("theirs", "2026-04-01T00:00:00Z", "north")]
    )
    assert [i["subject"] for i in _get(api, acme.read_token).json()["results"]] == ["mine"]
    foreign = _get(api, acme.read_token, f"?contract={outsider.contract.pk}").json()
    assert foreign["count"] == 0


def test_pages(acme, api):
    events = [_detect(f"i{n:03d}", f"2026-04-01T00:{n:02d}:00Z") for n in range(30)]
    post_events(api, acme.cluster_keys["east"], events)
    first = _get(api, acme.read_token, "?page_size=20").json()
    assert first["count"] == 30 and len(first["results"]) == 20 and first["next"]
    second = api.get(first["next"], HTTP_AUTHORIZATION=f"Bearer {acme.read_token}").json()
    subjects = [i["subject"] for i in first["results"] + second["results"]]
    assert subjects == sorted(subjects) and len(set(subjects)) == 30
