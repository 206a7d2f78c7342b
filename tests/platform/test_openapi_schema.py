"""The OpenAPI schema at /api/v1/schema is public and complete (SPEC 5): every endpoint's
authentication, request media types and every status code it can answer."""

import pytest
import yaml

ENDPOINTS = {
    # path → method, security schemes, status codes
    "/api/v1/events": ("post", {"clusterKey"}, {200, 207, 400, 401, 403, 411, 413, 415}),
    "/api/v1/incidents": ("get", {"readToken", "cookieAuth"}, {200, 400, 401, 403, 404, 414}),
    "/api/v1/contracts/{contract_id}/years": (
        "get",
        {"readToken", "cookieAuth"},
        {200, 401, 403, 404},
    ),
    "/api/v1/incidents/{incident_id}/disputes": (
        "post",
        {"readToken", "cookieAuth"},
        {201, 400, 401, 403, 404, 409},
    ),
    "/api/v1/billing/credits": ("get", {"billingToken"}, {200, 400, 401, 403, 414}),
    "/api/v1/billing/credits/{credit_id}/ack": (
        "post",
        {"billingToken"},
        {200, 401, 403, 404, 409},
    ),
}


def schema_as(client, key=None) -> dict:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    response = client.get("/api/v1/schema", **headers)
    assert response.status_code == 200, response.content
    return yaml.safe_load(response.content)


@pytest.fixture
def schema(client, db):
    return schema_as(client)


def test_schema_is_public_whatever_key_is_sent(client, acme):
    from yoco.accounts.actions import do_create_billing_token

    billing = do_create_billing_token(name="export")[1]
    cluster_key = acme.cluster_keys["east"]
    for key in (None, cluster_key, acme.read_token, billing, "not-a-key"):
        assert set(schema_as(client, key)["paths"]) == set(ENDPOINTS)


def test_every_endpoint_names_its_authentication_and_status_codes(schema):
    schemes = schema["components"]["securitySchemes"]
    for name in ("clusterKey", "readToken", "billingToken"):
        assert schemes[name] == {
            "type": "http",
            "scheme": "bearer",
            "description": schemes[name]["description"],
        }
    for path, (method, security, codes) in ENDPOINTS.items():
        operation = schema["paths"][path][method]
        assert {name for req in operation["security"] for name in req} == security, path
        assert {int(code) for code in operation["responses"]} == codes, path


def test_every_error_answer_is_a_detail(schema):
    for path, (method, _, codes) in ENDPOINTS.items():
        responses = schema["paths"][path][method]["responses"]
        for code in codes - {200, 201, 207, 414}:  # 414: gunicorn's own HTML page
            body = responses[str(code)]["content"]["application/json"]["schema"]
            assert body == {"$ref": "#/components/schemas/Error"}, (path, code)
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["detail"]


def test_ingest_media_types_are_a_batch_array_and_one_event(schema):
    content = schema["paths"]["/api/v1/events"]["post"]["requestBody"]["content"]
    event = {"$ref": "#/components/schemas/CloudEvent"}
    assert content == {
        "application/cloudevents-batch+json": {"schema": {"type": "array", "items": event}},
        "application/cloudevents+json": {"schema": event},
    }
    cloud_event = schema["components"]["schemas"]["CloudEvent"]
    assert set(cloud_event["required"]) == {"specversion", "id", "source", "type", "time"}
    assert cloud_event["properties"]["id"]["maxLength"] == 200
    assert cloud_event["properties"]["source"]["maxLength"] == 300
    event_type = cloud_event["properties"]["type"]["$ref"].rsplit("/", 1)[-1]
    assert "io.yoco.failure.detected" in schema["components"]["schemas"][event_type]["enum"]


def test_contract_years_document_counts_and_credit(schema):
    years = schema["components"]["schemas"]["ContractYear"]
    assert {"counts", "eligible", "compliance", "meets", "credit"} <= set(years["properties"])
    counts = schema["components"]["schemas"]["YearCounts"]["properties"]
    assert set(counts) == {
        "live_resolved", "rolled_back", "failed", "pending", "excluded", "planned",
    }  # fmt: skip


def test_an_unknown_api_url_answers_json(client, db):
    response = client.get("/api/v1/contracts/not-a-number/years")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_disputes_listing_documents_its_answers(schema):
    operation = schema["paths"]["/api/v1/incidents/{incident_id}/disputes"]["get"]
    assert {int(code) for code in operation["responses"]} == {200, 401, 403, 404}
    assert {name for req in operation["security"] for name in req} == {"readToken", "cookieAuth"}
