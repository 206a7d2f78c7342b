"""A snapshot naming a rules version that was never released cannot be re-derived: a clear
error naming the released versions, exit status 2."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.platform.closed_year import close_missed_year
from yoco.guarantee import rules
from yoco.guarantee.models import Credit


def test_an_unknown_rules_version_is_a_clear_error(acme, api):
    closed = close_missed_year(api, acme)
    Credit.objects.filter(pk=closed.credit.pk).update(
        evidence={**closed.credit.evidence, "rules_version": "0.9-never"}
    )
    with pytest.raises(CommandError) as raised:
        call_command("verify_credit", str(closed.credit.pk), stdout=StringIO())
    assert raised.value.returncode == 2
    message = str(raised.value)
    assert "rules version '0.9-never' was never released" in message
    assert f"released: {rules.RULES_VERSION}" in message
