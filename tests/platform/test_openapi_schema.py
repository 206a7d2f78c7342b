"""The OpenAPI schema is served at /api/v1/schema and documents every public endpoint."""

import yaml


def test_schema_lists_the_public_api(client, db):
    response = client.get("/api/v1/schema")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    assert {
        "/api/v1/events",
        "/api/v1/incidents",
        "/api/v1/contracts/{contract_id}/years",
        "/api/v1/billing/credits",
        "/api/v1/billing/credits/{credit_id}/ack",
    } <= set(schema["paths"])
