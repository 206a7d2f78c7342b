"""Delivering the outbox: claim a row, send it, record the attempt, schedule the next one.

At least once, never two copies at a time, and recognisable as one:
* A worker claims a row with a conditional UPDATE (`pending` and due, or `sending` with its
  lease run out) → `sending` with a lease longer than any send can take. A second worker's
  UPDATE matches nothing, so two live workers never send the same row.
* A worker SIGKILLed mid-send leaves the row `sending`; once its lease runs out the sweep
  claims it again and sends the *same* `webhook-id` (and the same e-mail `Message-ID`): the
  receiver may see it twice on the wire and keeps it once (Standard Webhooks: de-duplicate by
  `webhook-id`).
* A failed attempt (an exception, or a status outside 2xx) is retried after an exponential
  back-off; after `YOCO_NOTIFY_MAX_ATTEMPTS` attempts the row is `failed` for good.
"""

import json
import time
from datetime import UTC, datetime, timedelta

import requests
from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from yoco.notifications.models import DeliveryAttempt, Notification

MAX_BACKOFF = timedelta(hours=6)


def send_timeout() -> float:
    return float(settings.YOCO_NOTIFY_SEND_TIMEOUT_SECONDS)


def lease() -> timedelta:
    """How long a claim holds: three send timeouts, so a live sender never loses its claim."""
    return timedelta(seconds=3 * send_timeout())


def backoff(attempts: int) -> timedelta:
    """Wait after the `attempts`-th failure: base · 2^(attempts−1), at most 6 h."""
    base = timedelta(seconds=settings.YOCO_NOTIFY_BACKOFF_SECONDS)
    return min(base * 2 ** max(attempts - 1, 0), MAX_BACKOFF)


def _claimable(now: datetime) -> Q:
    return Q(state=Notification.PENDING, next_attempt_at__lte=now) | Q(
        state=Notification.SENDING, claimed_until__lt=now
    )


def due(now: datetime | None = None):
    return Notification.objects.filter(_claimable(now or timezone.now())).order_by("pk")


def claim(pk: int, now: datetime) -> Notification | None:
    claimed = (
        Notification.objects.filter(_claimable(now), pk=pk)
        .update(state=Notification.SENDING, claimed_until=now + lease(), attempts=F("attempts") + 1)
    )  # fmt: skip
    if not claimed:
        return None
    return Notification.objects.select_related("endpoint").get(pk=pk)


def signed_headers(notification: Notification, body: str, now: datetime) -> dict[str, str]:
    """The Standard Webhooks headers of one delivery of `body`."""
    signature = Webhook(notification.endpoint.secret).sign(notification.webhook_id, now, body)
    return {
        "content-type": "application/cloudevents+json",
        "webhook-id": notification.webhook_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }


def _post_webhook(notification: Notification) -> int:
    body = json.dumps(notification.event, separators=(",", ":"))
    headers = signed_headers(notification, body, datetime.now(UTC))
    response = requests.post(
        notification.endpoint.url,
        data=body.encode(),
        headers=headers,
        timeout=send_timeout(),
        allow_redirects=False,
    )
    return response.status_code


def email_text(event: dict) -> tuple[str, str]:
    """Subject and body of the e-mail telling of `event`."""
    data = event["data"]
    if event["type"] == "io.yoco.year.status_changed":
        subject = f"[YOCO] {data['customer']}: contract {data['contract']} year {data['year']} "
        subject += f"is {data['label'].lower()}"
        body = f"{data['label']} (was {data['previous_status']}).\n{data['detail']}\n"
    elif event["type"] == "io.yoco.credit.state_changed":
        subject = f"[YOCO] {data['customer']}: credit {data['credit']} is {data['state']}"
        body = (
            f"Contract {data['contract']} year {data['year']}: credit {data['credit']} of "
            f"{data['amount']} {data['currency']} is {data['state']} "
            f"(was {data['previous_state'] or 'none'}).\n"
        )
    else:
        subject, body = "[YOCO] test notification", "Notifications reach this address.\n"
    return subject, body + f"\nEvent {event['id']} ({event['type']}) at {event['time']}.\n"


def _send_email(notification: Notification) -> int | None:
    subject, body = email_text(notification.event)
    EmailMessage(
        subject,
        body,
        to=[notification.email],
        headers={"Message-ID": f"<{notification.webhook_id}@yoco>"},
    ).send()
    return None


def deliver(pk: int, now: datetime | None = None) -> str | None:
    """One attempt at notification `pk` if it is due and nobody holds it; returns its state
    afterwards, or None when it was not claimed."""
    now = now or timezone.now()
    notification = claim(pk, now)
    if notification is None:
        return None
    started = time.monotonic()
    status_code, error = None, ""
    try:
        if notification.channel == Notification.WEBHOOK:
            status_code = _post_webhook(notification)
            if not 200 <= status_code < 300:
                error = f"HTTP {status_code}"
        else:
            _send_email(notification)
    except Exception as exc:  # any failure of the destination is recorded and retried
        error = f"{type(exc).__name__}: {exc}"[:2000]
    latency_ms = int((time.monotonic() - started) * 1000)
    return _record(notification, status_code=status_code, error=error, latency_ms=latency_ms)


def _record(notification: Notification, *, status_code, error: str, latency_ms: int) -> str:
    attempts = notification.attempts
    if not error:
        changes = {"state": Notification.DELIVERED, "delivered_at": timezone.now()}
    elif attempts >= settings.YOCO_NOTIFY_MAX_ATTEMPTS:
        changes = {"state": Notification.FAILED}
    else:
        changes = {
            "state": Notification.PENDING,
            "next_attempt_at": timezone.now() + backoff(attempts),
        }
    with transaction.atomic(durable=True):
        DeliveryAttempt.objects.create(
            notification=notification,
            number=attempts,
            ok=not error,
            status_code=status_code,
            latency_ms=latency_ms,
            error=error,
        )
        # Only while still ours: a claim whose lease ran out may have been taken over.
        Notification.objects.filter(
            pk=notification.pk, state=Notification.SENDING, attempts=attempts
        ).update(claimed_until=None, **changes)
    return changes["state"]


def deliver_due(now: datetime | None = None) -> int:
    """One attempt at every due notification; returns how many were claimed."""
    return sum(deliver(pk, now) is not None for pk in due(now).values_list("pk", flat=True))
