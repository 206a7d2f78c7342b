"""State changes of customers and their users (see yoco/guarantee/actions.py for the pattern)."""

from django.contrib.auth import get_user_model
from django.db import transaction

from yoco.accounts.models import Customer, Membership
from yoco.guarantee.actions import ActionError, audit


def do_add_portal_user(customer: Customer, *, username: str, password: str, email: str = "",
                       actor=None):  # fmt: skip
    """A portal login for `customer`; a user belongs to exactly one customer."""
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        raise ActionError(f"user {username!r} exists already")
    with transaction.atomic():
        user = User.objects.create_user(username=username, password=password, email=email)
        Membership.objects.create(user=user, customer=customer)
        audit(actor, "add_portal_user", user, after={"customer": customer.name, "email": email})
    return user
