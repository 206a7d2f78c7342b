"""A snapshot that cannot be re-derived at all (taken before snapshots named their events, or
cut down behind the platform's back) is a clear error, exit status 2, never a traceback."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.platform.closed_year import close_missed_year
from yoco.guarantee.models import Credit

OLD = {"counts": {"failed": 1}, "eligible": 1, "incident_ids": [1], "rules_version": "1"}


@pytest.mark.parametrize(
    ("evidence", "message"),
    [
        (lambda current: OLD, "this snapshot names no events"),
        (lambda current: {**current, "counts": None}, "the snapshot is malformed"),
        (lambda current: {**current, "terms": {}}, "the snapshot is malformed"),
    ],
)
def test_an_unusable_snapshot_is_a_clear_error(acme, api, evidence, message):
    closed = close_missed_year(api, acme)
    Credit.objects.filter(pk=closed.credit.pk).update(evidence=evidence(closed.credit.evidence))
    with pytest.raises(CommandError) as raised:
        call_command("verify_credit", str(closed.credit.pk), stdout=StringIO())
    assert raised.value.returncode == 2 and message in str(raised.value)
