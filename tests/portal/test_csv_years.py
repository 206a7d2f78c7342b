"""The years CSV lists every contract year with its counts, result and credit."""

import csv
import io

from tests.portal.conftest import body


def test_years_csv(demo, owner):
    rows = list(csv.DictReader(io.StringIO(body(owner.get("/years.csv")))))
    assert [r["year"] for r in rows] == ["1", "2", "3"]
    first = rows[0]
    assert first["state"] == "closed" and first["meets"] == "false"
    assert first["credit_state"] == "earned"
    assert first["credit_amount"] == "300000.00" and first["currency"] == "USD"
    assert first["target"] == "90"
    assert rows[1]["state"] == "open" and rows[1]["credit_state"] == ""
