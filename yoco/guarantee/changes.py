"""What the guarantee announces to the layers above it (notifications), as Django signals.

They are sent synchronously *inside* the transaction of the change, so a receiver that writes
rows (the notification outbox) commits or rolls back with the change itself. The guarantee
knows nothing of its receivers: `yoco.notifications` connects them when its app is ready, which
keeps the layers one-way (portal → notifications → guarantee → …).

* `year_status_changed(year, before, after)`: a year's status (`status.YearStatus`) changed,
  by an event, an override, the periodic expiry (time alone), closing or reopening.
* `credit_state_changed(credit, before, after)`: a credit's state changed (`before` is None
  when it was just earned).
"""

from django.dispatch import Signal

year_status_changed = Signal()
credit_state_changed = Signal()


def announce_year_status(year, before, after) -> None:
    if before.status != after.status:
        year_status_changed.send(sender=type(year), year=year, before=before, after=after)


def announce_credit_state(credit, before: str | None, after: str) -> None:
    if before != after:
        credit_state_changed.send(sender=type(credit), credit=credit, before=before, after=after)
