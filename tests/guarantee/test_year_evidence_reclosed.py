"""Reopening a year clears its evidence snapshot; closing it again takes a fresh one with what
changed meanwhile (here an override that makes the year meet its target: no new credit), and
the fresh snapshot re-derives."""

from tests.platform.account_team import AFTER_YEAR_1, staff
from tests.platform.closed_year import close_missed_year
from yoco.guarantee.actions import do_close_due_years, do_override_outcome, do_reopen_year
from yoco.guarantee.evidence import evidence_hash, verify_year
from yoco.guarantee.models import ContractYear, Credit


def test_a_reclosed_year_has_a_fresh_snapshot(acme, api):
    closed = close_missed_year(api, acme)
    first = evidence_hash(closed.year.evidence)
    bob = staff("bob")
    year = do_reopen_year(closed.year, actor=bob, reason="late events")
    assert year.evidence == {}
    do_override_outcome(
        closed.incidents["failed"], outcome="excluded", actor=bob, reason="network-wide outage"
    )
    do_close_due_years(now=AFTER_YEAR_1)
    year = ContractYear.objects.get(pk=year.pk)
    assert year.state == ContractYear.CLOSED and evidence_hash(year.evidence) != first
    assert year.evidence["counts"]["excluded"] == 3 and year.evidence["eligible"] == 1
    assert len(year.evidence["overrides"]) == 3
    assert verify_year(year).agrees
    assert not Credit.objects.filter(contract_year=year).exclude(state=Credit.VOIDED).exists()
