"""The dashboard aggregates in the database: its query count does not grow with incidents."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from yoco.guarantee.models import Incident


def test_query_count_is_independent_of_the_incident_count(demo, owner):
    with CaptureQueriesContext(connection) as small:
        assert owner.get("/").status_code == 200
    template = Incident.objects.filter(contract=demo.contract, year_number=2).first()
    fields = {
        f.attname: getattr(template, f.attname)
        for f in Incident._meta.concrete_fields
        if f.attname not in ("id", "subject")
    }
    Incident.objects.bulk_create([Incident(subject=f"extra-{i}", **fields) for i in range(500)])
    with CaptureQueriesContext(connection) as large:
        assert owner.get("/").status_code == 200
    assert len(large) == len(small)
    assert len(small) < 25
