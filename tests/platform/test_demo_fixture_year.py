"""The generated fixture, ingested through the HTTP API, gives the /years counts that the
generator computes independently from the SPEC rules (fixtures/generate_demo.py)."""

import importlib.util
import json
import sys
from datetime import date
from decimal import Decimal
from pathlib import Path

from tests.conftest import post_events

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_demo", FIXTURE / "generate_demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return module


def test_fixture_contract_a_through_http(contract_factory, api):
    doc = json.loads((FIXTURE / "demo.json").read_text())
    spec = doc["contracts"][0]
    created = contract_factory(
        customer_name=doc["customer"],
        start=date.fromisoformat(spec["start"]),
        years=spec["years"],
        annual_value=Decimal(spec["annual_value"]),
        currency=spec["currency"],
        clusters=spec["clusters"],
    )
    cluster = spec["clusters"][0]
    events = [e for e in doc["events"] if e["source"].startswith(f"/clusters/{cluster}/")]
    key = created.cluster_keys[cluster]
    for start in range(0, len(events), 500):
        response = post_events(api, key, events[start : start + 500])
        assert response.status_code == 200, response.json()

    years = api.get(
        f"/api/v1/contracts/{created.contract.pk}/years",
        HTTP_AUTHORIZATION=f"Bearer {created.read_token}",
    ).json()["years"]
    expected = _generator().expected_counts(doc)
    for year in years:
        want = expected.get((spec["key"], year["number"]))
        if want is None:
            continue
        assert year["counts"] == {k: want.get(k, 0) for k in year["counts"]}, year["number"]
    assert [y["meets"] for y in years] == [True, False, True]
