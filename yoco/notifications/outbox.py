"""The outbox: the guarantee's change signals (`yoco.guarantee.changes`) become Notification
rows, one per destination, in the transaction of the change; their delivery is sent to the
worker once that transaction commits (and the periodic sweep finds any the queue lost)."""

import uuid
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from yoco.guarantee.changes import credit_state_changed, year_status_changed
from yoco.guarantee.rules import format_amount
from yoco.notifications.models import Contact, Endpoint, Notification

YEAR_STATUS_CHANGED = "io.yoco.year.status_changed"
CREDIT_STATE_CHANGED = "io.yoco.credit.state_changed"
TEST = "io.yoco.test"


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cloud_event(event_type: str, *, source: str, subject: str, data: dict) -> dict:
    """A CloudEvents 1.0 envelope; its id names the change (the same for every destination)."""
    return {
        "specversion": "1.0",
        "id": str(uuid.uuid4()),
        "source": source,
        "type": event_type,
        "subject": subject,
        "time": _rfc3339(timezone.now()),
        "datacontenttype": "application/json",
        "data": data,
    }


def write(event: dict, customer, *, billing: bool = False, only=None) -> list[Notification]:
    """One row per destination of `customer`'s change: each contact's address, each active
    endpoint of the customer (and of billing when `billing`); `only` restricts to one endpoint.
    Delivery is queued on commit."""
    now = timezone.now()
    rows = []
    if only is None:
        for email in Contact.objects.filter(customer=customer).values_list("email", flat=True):
            rows.append(Notification(channel=Notification.EMAIL, email=email))
        endpoints = Endpoint.objects.filter(active=True, customer=customer)
        if billing:
            endpoints = endpoints | Endpoint.objects.filter(active=True, owner=Endpoint.BILLING)
    else:
        endpoints = [only]
    for endpoint in endpoints:
        rows.append(Notification(channel=Notification.WEBHOOK, endpoint=endpoint))
    for row in rows:
        row.event, row.event_type, row.customer = event, event["type"], customer
        row.next_attempt_at = now
    created = Notification.objects.bulk_create(rows)
    ids = [row.pk for row in created]
    if ids:
        transaction.on_commit(lambda: queue(ids))
    return created


def queue(ids: list[int]) -> None:
    from yoco.notifications.tasks import deliver_notification_task

    for pk in ids:
        deliver_notification_task.delay(pk)


def on_year_status_changed(sender, *, year, before, after, **kwargs) -> None:
    contract = year.contract
    data = {
        "contract": contract.pk,
        "customer": contract.customer.name,
        "year": year.number,
        "start": _rfc3339(year.start),
        "end": _rfc3339(year.end),
        "state": year.state,
        "status": after.status,
        "label": after.label,
        "detail": after.detail,
        "previous_status": before.status,
        "counts": year.counts,
    }
    event = cloud_event(
        YEAR_STATUS_CHANGED,
        source=f"/contracts/{contract.pk}",
        subject=f"years/{year.number}",
        data=data,
    )
    write(event, contract.customer)


def on_credit_state_changed(sender, *, credit, before, after, **kwargs) -> None:
    year = credit.contract_year
    contract = year.contract
    data = {
        "credit": credit.pk,
        "contract": contract.pk,
        "customer": contract.customer.name,
        "year": year.number,
        "state": after,
        "previous_state": before,
        "amount": format_amount(credit.amount, credit.currency),
        "currency": credit.currency,
    }
    event = cloud_event(
        CREDIT_STATE_CHANGED,
        source=f"/contracts/{contract.pk}",
        subject=f"credits/{credit.pk}",
        data=data,
    )
    write(event, contract.customer, billing=True)


def connect() -> None:
    year_status_changed.connect(on_year_status_changed, dispatch_uid="notifications.year")
    credit_state_changed.connect(on_credit_state_changed, dispatch_uid="notifications.credit")
