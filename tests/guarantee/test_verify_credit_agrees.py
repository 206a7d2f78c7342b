"""`manage.py verify_credit` re-derives a credit's year from the events, overrides and dispute
decisions its evidence snapshot names, with the rules version it names, and agrees."""

from io import StringIO

from django.core.management import call_command

from tests.platform.closed_year import close_missed_year
from yoco.accounts.models import AuditRecord
from yoco.guarantee import rules
from yoco.guarantee.evidence import evidence_hash


def test_snapshot_names_its_inputs_and_the_credit_re_derives(acme, api):
    closed = close_missed_year(api, acme)
    evidence = closed.credit.evidence
    assert evidence == closed.year.evidence
    assert evidence["rules_version"] == rules.RULES_VERSION
    incidents = {entry["id"]: entry for entry in evidence["incidents"]}
    live = incidents[closed.incidents["live"].pk]
    assert len(live["events"]) == 3 and len(live["job_events"]) == 1
    assert live["outcome"] == "live_resolved"
    assert {o["incident"]: o["outcome"] for o in evidence["overrides"]} == {
        closed.incidents["overridden"].pk: "excluded",
        closed.incidents["disputed"].pk: "excluded",
    }
    assert sorted((d["incident"], d["state"]) for d in evidence["disputes"]) == sorted(
        [(closed.incidents["disputed"].pk, "upheld"), (closed.incidents["failed"].pk, "rejected")]
    )
    earned = AuditRecord.objects.get(action="earn_credit")
    assert earned.after["evidence_hash"] == evidence_hash(evidence)

    out = StringIO()
    call_command("verify_credit", str(closed.credit.pk), stdout=out)
    text = out.getvalue()
    assert "agrees" in text and "DIFFERS" not in text
    assert "live_resolved 1, rolled_back 0, failed 1, pending 0, excluded 2" in text
    assert f"rules version {rules.RULES_VERSION}" in text
    assert evidence_hash(evidence) in text
