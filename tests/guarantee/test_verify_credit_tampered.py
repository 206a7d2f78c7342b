"""A credit's evidence snapshot changed in the database behind the platform's back: re-deriving
the year reports each difference (and the hash its audit record holds), exit status 1."""

import copy
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.platform.closed_year import close_missed_year
from yoco.guarantee.models import Credit


def _more_live(evidence, closed):
    evidence["counts"]["live_resolved"] += 1
    evidence["counts"]["failed"] -= 1


def _override_dropped(evidence, closed):
    evidence["overrides"] = [
        o for o in evidence["overrides"] if o["incident"] != closed.incidents["overridden"].pk
    ]


MORE_LIVE = ["live_resolved: snapshot 2, re-derived 1", "failed: snapshot 0, re-derived 1"]
OVERRIDE_DROPPED = ["failed: snapshot 1, re-derived 2", "snapshot excluded, re-derived failed"]


@pytest.mark.parametrize(
    ("tamper", "expected"), [(_more_live, MORE_LIVE), (_override_dropped, OVERRIDE_DROPPED)]
)
def test_a_tampered_snapshot_is_reported(acme, api, tamper, expected):
    closed = close_missed_year(api, acme)
    evidence = copy.deepcopy(closed.credit.evidence)
    tamper(evidence, closed)
    Credit.objects.filter(pk=closed.credit.pk).update(evidence=evidence)

    out = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("verify_credit", str(closed.credit.pk), stdout=out)
    assert raised.value.returncode == 1
    assert "differs from its snapshot" in str(raised.value)
    text = out.getvalue()
    for difference in expected:
        assert difference in text
    assert "the snapshot was changed after it was taken" in text
