"""close_years does not close a year with an open dispute; it reports it as waiting, and closes
it once the dispute is answered (SPEC 4.7)."""

from io import StringIO

from django.core.management import call_command

from tests.platform.account_team import fail_once, staff
from yoco.guarantee.actions import do_open_dispute, do_reject_dispute
from yoco.guarantee.models import ContractYear, Incident


def _close():
    out = StringIO()
    call_command("close_years", now="2027-02-01T00:00:00Z", stdout=out)
    return out.getvalue()


def test_waits_then_closes(acme, api):
    fail_once(api, acme, "east")
    dispute = do_open_dispute(Incident.objects.get(), reason="GPU", label="t")
    out = _close()
    assert f"Waiting: contract {acme.contract.pk} year 1" in out and "1 open dispute" in out
    assert ContractYear.objects.get(contract=acme.contract, number=1).state == "open"
    do_reject_dispute(dispute, reason="user code", actor=staff("alice"))
    out = _close()
    assert "Waiting" not in out and f"Closed contract {acme.contract.pk} year 1" in out
    assert ContractYear.objects.get(contract=acme.contract, number=1).state == "closed"
