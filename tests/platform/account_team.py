"""Helpers for the account-team, admin and billing tests: people, missed years and tokens."""

from datetime import UTC, datetime

from tests.conftest import cloud_event, post_events

# After year 1 (2026) of the default contract, its grace period over; year 2 still open.
AFTER_YEAR_1 = datetime(2027, 2, 1, tzinfo=UTC)


def staff(username: str):
    """An account-team member (staff; superuser so that every admin page is open to them)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username, is_staff=True, is_superuser=True)


def customer_user(username: str, customer):
    """A portal user of `customer` (not staff)."""
    from django.contrib.auth import get_user_model

    from yoco.accounts.models import Membership

    user = get_user_model().objects.create_user(username)
    Membership.objects.create(user=user, customer=customer)
    return user


def fail_once(api, created, cluster: str, subject: str = "inc-1", time=None):
    """One unplanned failure with no recovery on `cluster` (fails once past its deadline)."""
    event = cloud_event(
        "failure.detected",
        cluster=cluster,
        subject=subject,
        time=time,
        trigger="unplanned",
        category="gpu_xid",
    )
    response = post_events(api, created.cluster_keys[cluster], [event])
    assert response.status_code == 200, response.content


def missed_credits(contract_factory, api, n: int = 1):
    """`n` contracts (own customer, own cluster) whose year 1 missed and was closed: n credits."""
    from yoco.guarantee.actions import do_close_due_years
    from yoco.guarantee.models import Credit

    for i in range(n):
        cluster = f"gpu-{i}"
        created = contract_factory(customer_name=f"Customer {i}", clusters=[cluster])
        fail_once(api, created, cluster)
    do_close_due_years(now=AFTER_YEAR_1)
    credits = list(Credit.objects.order_by("pk"))
    assert len(credits) == n and all(c.state == Credit.EARNED for c in credits)
    return credits


def billing_token() -> str:
    from yoco.accounts.actions import do_create_billing_token

    return do_create_billing_token(name="billing test")[1]


def records(obj, action=None):
    """The audit records of `obj`, oldest first."""
    from yoco.accounts.models import AuditRecord

    found = AuditRecord.objects.filter(
        object_type=type(obj).__name__, object_id=str(obj.pk)
    ).order_by("id")
    return list(found.filter(action=action) if action else found)
