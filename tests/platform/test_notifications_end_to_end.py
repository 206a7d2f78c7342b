"""An incident stream tips year 1 into at risk; closing short of the target makes it missed and
earns a credit. Per change: exactly one e-mail per recipient and one signed webhook per
endpoint (distinct webhook-ids, verified by a real receiver that fails the first attempts)."""

import pytest
from django.core import mail

from tests.platform.account_team import AFTER_YEAR_1, fail_once, staff
from tests.platform.webhook_receiver import Receiver
from yoco.guarantee.actions import do_close_due_years
from yoco.guarantee.models import ContractYear
from yoco.notifications.actions import do_add_contact, do_add_endpoint
from yoco.notifications.delivery import deliver_due
from yoco.notifications.models import Contact, DeliveryAttempt, Notification


@pytest.fixture
def receiver():
    with Receiver(fail_first=3) as running:
        yield running


def _register(acme, receiver):
    customer = acme.contract.customer
    alice = staff("alice")
    do_add_contact(customer, email="ops@acme.test", actor=alice)
    do_add_contact(customer, email="am@yoco.test", kind=Contact.ACCOUNT_TEAM, actor=alice)
    for path, owner in (("/acme", customer), ("/billing", None)):
        _, secret = do_add_endpoint(url=receiver.url + path, customer=owner, actor=alice)
        receiver.secrets[path] = secret


def _deliver_everything():
    for _ in range(10):  # the back-off is 0 here: each round retries what failed
        if not deliver_due():
            return
    raise AssertionError("deliveries still due after 10 rounds")


def test_one_email_per_recipient_and_one_webhook_per_endpoint_per_change(
    acme, api, receiver, settings
):
    settings.YOCO_NOTIFY_BACKOFF_SECONDS = 0
    _register(acme, receiver)
    year = ContractYear.objects.get(contract=acme.contract, number=1)
    fail_once(api, acme, "east")
    do_close_due_years(now=year.start.replace(month=6))  # the deadline passes: failed, at risk
    _deliver_everything()
    do_close_due_years(now=AFTER_YEAR_1)  # closes short of the target: missed, credit earned
    _deliver_everything()

    assert receiver.unverified == 0 and receiver.requests > sum(receiver.deliveries.values())
    assert receiver.types("/acme") == [
        "io.yoco.credit.state_changed",
        "io.yoco.year.status_changed",
        "io.yoco.year.status_changed",
    ]
    assert receiver.types("/billing") == ["io.yoco.credit.state_changed"]
    assert all(n == 1 for n in receiver.deliveries.values())
    statuses = sorted(
        (e["data"]["previous_status"], e["data"]["status"])
        for e in receiver.received["/acme"].values()
        if e["type"] == "io.yoco.year.status_changed"
    )
    assert statuses == [("at_risk", "missed"), ("met", "at_risk")]
    # one change, one CloudEvent id, on every endpoint
    credit_ids = {
        e["id"]
        for path in ("/acme", "/billing")
        for e in receiver.received[path].values()
        if e["type"] == "io.yoco.credit.state_changed"
    }
    assert len(credit_ids) == 1

    sent = sorted((m.to[0], m.subject) for m in mail.outbox)
    assert len(sent) == 6 and len(set(sent)) == 6  # 3 changes × 2 recipients, none twice
    assert {to for to, _ in sent} == {"ops@acme.test", "am@yoco.test"}
    assert Notification.objects.exclude(state="delivered").count() == 0
    failed_attempts = DeliveryAttempt.objects.filter(ok=False)
    assert failed_attempts.count() == 3 and set(
        failed_attempts.values_list("status_code", flat=True)
    ) == {503}
