"""Delivery tasks: one per notification when its change commits (retried by Celery after the
back-off the row stores), and the periodic sweep for every due row a lost task or a killed
worker left behind."""

from celery import shared_task
from django.utils import timezone


@shared_task(bind=True, acks_late=True, max_retries=None)
def deliver_notification_task(self, pk: int) -> str | None:
    from yoco.notifications.delivery import deliver
    from yoco.notifications.models import Notification

    state = deliver(pk)
    if state == Notification.PENDING and not self.request.is_eager:
        # Eager mode (no broker) leaves the retry to the sweep instead of retrying in-line.
        next_at = Notification.objects.get(pk=pk).next_attempt_at
        raise self.retry(countdown=max((next_at - timezone.now()).total_seconds(), 0))
    return state


@shared_task
def deliver_due_notifications_task() -> int:
    from yoco.notifications.delivery import deliver_due

    return deliver_due()
