"""Every change of who is notified: one `do_*` function each, one durable transaction with its
audit record. `actor` is a portal user of the customer, or an account-team member."""

from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator, URLValidator
from django.db import transaction

from yoco.accounts.actions import audit
from yoco.lib.errors import ActionError
from yoco.notifications import outbox
from yoco.notifications.models import Contact, Endpoint, Notification


def _check(validator, value: str, what: str) -> str:
    value = (value or "").strip()
    try:
        validator(value)
    except ValidationError:
        raise ActionError(f"{value!r} is not a valid {what}") from None
    return value


def do_add_contact(customer, *, email: str, kind: str = Contact.CUSTOMER, actor) -> Contact:
    email = _check(EmailValidator(), email, "e-mail address")
    with transaction.atomic(durable=True):
        if Contact.objects.filter(customer=customer, email__iexact=email).exists():
            raise ActionError(f"{email} is a contact already")
        contact = Contact.objects.create(customer=customer, email=email, kind=kind)
        audit(actor, "add_contact", contact, after={"email": email, "kind": kind})
    return contact


def do_remove_contact(contact: Contact, *, actor) -> None:
    with transaction.atomic(durable=True):
        if Contact.objects.filter(pk=contact.pk).delete()[0]:
            audit(actor, "remove_contact", contact, before={"email": contact.email})


def do_add_endpoint(*, url: str, actor, customer=None) -> tuple[Endpoint, str]:
    """A webhook endpoint of `customer` (or of billing when None); returns it and its signing
    secret, to be shown this once."""
    url = _check(URLValidator(schemes=["http", "https"]), url, "http(s) URL")
    owner = Endpoint.CUSTOMER if customer is not None else Endpoint.BILLING
    with transaction.atomic(durable=True):
        endpoint = Endpoint.objects.create(owner=owner, customer=customer, url=url)
        audit(actor, "add_endpoint", endpoint, after={"url": url, "owner": owner})
    return endpoint, endpoint.secret


def do_disable_endpoint(endpoint: Endpoint, *, actor) -> bool:
    """No further notifications to it; its delivery log stays."""
    with transaction.atomic(durable=True):
        if not Endpoint.objects.filter(pk=endpoint.pk, active=True).update(active=False):
            return False
        audit(actor, "disable_endpoint", endpoint, before={"active": True}, after={"active": False})
    return True


def do_send_test(endpoint: Endpoint, *, actor) -> Notification:
    """A signed `io.yoco.test` event to this endpoint alone, delivered like any other."""
    if not endpoint.active:
        raise ActionError("this endpoint is disabled")
    event = outbox.cloud_event(
        outbox.TEST, source="/yoco", subject=f"endpoints/{endpoint.pk}", data={"test": True}
    )
    customer = endpoint.customer
    with transaction.atomic(durable=True):
        (notification,) = outbox.write(event, customer, only=endpoint)
        audit(actor, "send_test", endpoint, after={"webhook_id": notification.webhook_id})
    return notification
