"""The incidents CSV honours the list's filters and holds one row per incident."""

import csv
import io

from tests.portal.conftest import body
from yoco.guarantee.models import Incident


def test_csv_honours_filters(demo, owner):
    response = owner.get(f"/incidents.csv?contract={demo.contract.pk}&year=2&outcome=failed")
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="incidents.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(body(response))))
    expected = Incident.objects.filter(contract=demo.contract, year_number=2, outcome="failed")
    assert {int(r["id"]) for r in rows} == set(expected.values_list("pk", flat=True))
    assert all(r["outcome"] == "failed" and r["year"] == "2" for r in rows)


def test_csv_without_filters_has_every_incident(demo, owner):
    rows = list(csv.DictReader(io.StringIO(body(owner.get("/incidents.csv")))))
    assert len(rows) == Incident.objects.filter(cluster=demo.cluster).count()
    override = next(r for r in rows if r["subject"] == "inc-power")
    assert override["outcome"] == "excluded" and override["computed_outcome"] == "failed"
    assert "FAC-2291" in override["override_reason"]
    assert override["detected_at"].endswith("Z")
