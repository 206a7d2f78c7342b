"""The account team changes a contract's progress-protected and advisor parameters: an audited
`do_*` action, through the admin's form; the portal shows the new values."""

from decimal import Decimal

import pytest

from tests.platform.account_team import customer_user, records, staff
from tests.platform.test_admin_actions import act
from yoco.guarantee.actions import ActionError, do_set_contract_parameters
from yoco.guarantee.models import Contract

NEW = dict(
    checkpoint_interval_minutes=60,
    restart_minutes=20,
    gpu_hour_price=Decimal("3.5"),
    spare_return_hours=Decimal("6.5"),
)


def test_the_change_is_stored_with_its_audit_record(acme):
    alice = staff("alice")
    do_set_contract_parameters(acme.contract, actor=alice, reason="new price list", **NEW)
    contract = Contract.objects.get(pk=acme.contract.pk)
    assert (contract.checkpoint_interval_minutes, contract.restart_minutes) == (60, 20)
    assert (contract.gpu_hour_price, contract.spare_return_hours) == (
        Decimal("3.5"),
        Decimal("6.5"),
    )
    (record,) = records(contract, "set_contract_parameters")
    assert record.actor == alice and record.reason == "new price list"
    assert record.before == {
        "checkpoint_interval_minutes": 90,
        "restart_minutes": 15,
        "gpu_hour_price": "2.0000",
        "spare_return_hours": "4.00",
    }
    assert (
        record.after["spare_return_hours"] == "6.50" and record.after["gpu_hour_price"] == "3.5000"
    )
    # The same values again change nothing and write nothing.
    do_set_contract_parameters(contract, actor=alice, reason="again", **NEW)
    assert len(records(contract, "set_contract_parameters")) == 1


@pytest.mark.parametrize(
    "change, message",
    [
        ({"checkpoint_interval_minutes": 0}, "checkpoint interval"),
        ({"restart_minutes": -1}, "restart"),
        ({"gpu_hour_price": Decimal("-1")}, "price"),
        ({"gpu_hour_price": Decimal("NaN")}, "price"),
        ({"gpu_hour_price": Decimal("1.00001")}, "decimal places"),
        ({"spare_return_hours": Decimal("0")}, "return time"),
        ({"spare_return_hours": Decimal("100000")}, "digits"),
    ],
)
def test_impossible_values_are_refused_and_nothing_changes(acme, change, message):
    with pytest.raises(ActionError, match=message):
        do_set_contract_parameters(
            acme.contract, actor=staff("alice"), reason="r", **{**NEW, **change}
        )
    contract = Contract.objects.get(pk=acme.contract.pk)
    assert contract.spare_return_hours == Decimal(4) and contract.restart_minutes == 15
    assert not records(contract, "set_contract_parameters")


def test_only_the_account_team_with_a_reason(acme):
    with pytest.raises(ActionError, match="account team"):
        do_set_contract_parameters(
            acme.contract, actor=customer_user("ada", acme.contract.customer), reason="r", **NEW
        )
    with pytest.raises(ActionError, match="reason"):
        do_set_contract_parameters(acme.contract, actor=staff("alice"), reason=" ", **NEW)


def test_through_the_admin_and_shown_on_the_portal(acme, client):
    client.force_login(staff("alice"))
    url = "/admin/guarantee/contract/"
    form = act(client, url, "set_parameters", [acme.contract.pk])
    assert form.status_code == 200 and b'name="spare_return_hours"' in form.content
    done = act(
        client, url, "set_parameters", [acme.contract.pk], apply="1", reason="renegotiated",
        checkpoint_interval_minutes="45", restart_minutes="10", gpu_hour_price="2.75",
        spare_return_hours="8",
    )  # fmt: skip
    assert done.status_code == 302
    contract = Contract.objects.get(pk=acme.contract.pk)
    assert contract.spare_return_hours == Decimal(8) and contract.checkpoint_interval_minutes == 45
    assert records(contract, "set_contract_parameters")[0].actor_label == "alice"

    client.force_login(customer_user("ada", contract.customer))
    page = client.get(f"/contracts/{contract.pk}/").content.decode()
    assert "checkpoint every 45 min, restart 10 min, 2.75 USD/GPU-hour" in page
    assert "8.00 h" in page  # the advisor's T
