"""Every state change of customers, their portal users and their credentials, and the audit
helper every `do_*` function (here and in `yoco.guarantee.actions`) writes its record with.

One `do_*` function per change: one durable transaction with its audit record inside it.
Views, the admin and management commands call these; nothing else writes these models.
A key is returned once, when it is made, and stored hashed.
"""

from django.contrib.auth import get_user_model
from django.db import transaction

from yoco.accounts.models import (
    AuditRecord,
    BillingToken,
    Cluster,
    ClusterKey,
    Customer,
    Membership,
    ReadToken,
)
from yoco.lib.errors import ActionError

SYSTEM = "system"


def audit(actor, action: str, obj, *, reason: str = "", before=None, after=None,
          object_id: str | None = None) -> AuditRecord:  # fmt: skip
    """Write the audit record of `action` on `obj` (named by its primary key unless
    `object_id` is given); `actor` is a user, a label such as "billing:abc", or None (system)."""
    return AuditRecord.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=getattr(actor, "username", None) or str(actor or SYSTEM),
        action=action,
        object_type=type(obj).__name__,
        object_id=str(obj.pk) if object_id is None else object_id,
        reason=reason,
        before=before,
        after=after,
    )


def require_account_team(actor) -> None:
    """The account team are the active staff users (the admin is theirs alone)."""
    if actor is None or not getattr(actor, "is_authenticated", False):
        raise ActionError("only a signed-in account-team member may do this")
    if not (actor.is_active and actor.is_staff):
        raise ActionError(f"{actor} is not on the account team")


def require_reason(reason: str | None) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ActionError("a reason is required")
    return reason


# --- Customers and their portal users -------------------------------------------------------


def do_create_customer(*, name: str, actor, reason: str = "") -> Customer:
    require_account_team(actor)
    name = (name or "").strip()
    if not name:
        raise ActionError("the customer name must not be empty")
    with transaction.atomic(durable=True):
        if Customer.objects.filter(name=name).exists():
            raise ActionError(f"a customer named {name!r} exists already")
        customer = Customer.objects.create(name=name)
        audit(actor, "create_customer", customer, reason=reason, after={"name": name})
    return customer


def do_add_portal_user(customer: Customer, *, username: str, password: str, email: str = "",
                       first_name: str = "", actor=None) -> object:  # fmt: skip
    """A new portal login for `customer`; a user belongs to exactly one customer."""
    User = get_user_model()
    with transaction.atomic(durable=True):
        if User.objects.filter(username=username).exists():
            raise ActionError(f"user {username!r} exists already")
        user = User.objects.create_user(
            username=username, password=password, email=email, first_name=first_name
        )
        Membership.objects.create(user=user, customer=customer)
        audit(actor, "add_portal_user", user, after={"customer": customer.name, "email": email})
    return user


def do_add_member(customer: Customer, user, *, actor, reason: str = "") -> Membership:
    """Give an existing user to a customer (a user belongs to one customer only)."""
    require_account_team(actor)
    with transaction.atomic(durable=True):
        existing = Membership.objects.filter(user=user).select_related("customer").first()
        if existing is not None:
            if existing.customer_id == customer.pk:
                return existing
            raise ActionError(f"{user} already belongs to {existing.customer}")
        membership = Membership.objects.create(user=user, customer=customer)
        audit(actor, "add_member", customer, reason=reason, after={"user": user.get_username()})
    return membership


def do_remove_member(membership: Membership, *, actor, reason: str = "") -> None:
    """Take a portal user away from its customer (the membership row goes; the audit stays)."""
    require_account_team(actor)
    with transaction.atomic(durable=True):
        removed, _ = Membership.objects.filter(pk=membership.pk).delete()
        if removed:
            audit(
                actor,
                "remove_member",
                membership.customer,
                reason=reason,
                before={"user": membership.user.get_username()},
                after=None,
            )


# --- Credentials ------------------------------------------------------------------------------


def _key_snapshot(key) -> dict:
    return {"prefix": key.prefix, "name": key.name, "revoked": key.revoked}


def _audit_key(actor, action: str, key, **fields) -> AuditRecord:
    # A key's primary key holds its hash: the audit names it by its public prefix only.
    return audit(actor, action, key, object_id=key.prefix, **fields)


def do_create_cluster_key(cluster: Cluster, *, actor, reason: str = "") -> tuple[ClusterKey, str]:
    """A further ingest key for a cluster; the key itself is returned once and never stored."""
    require_account_team(actor)
    with transaction.atomic(durable=True):
        record, key = ClusterKey.objects.create_key(name=f"{cluster.name} ingest", cluster=cluster)
        _audit_key(actor, "create_key", record, reason=reason, after=_key_snapshot(record))
    return record, key


def do_rotate_cluster_key(cluster: Cluster, *, actor, reason: str = "") -> tuple[ClusterKey, str]:
    """A new ingest key for the cluster, every older one revoked, in one transaction.

    The new key is returned once (show it, never store it)."""
    require_account_team(actor)
    with transaction.atomic(durable=True):
        old = list(ClusterKey.objects.filter(cluster=cluster, revoked=False))
        ClusterKey.objects.filter(pk__in=[k.pk for k in old], revoked=False).update(revoked=True)
        record, key = ClusterKey.objects.create_key(name=f"{cluster.name} ingest", cluster=cluster)
        audit(
            actor,
            "rotate_cluster_key",
            cluster,
            reason=reason,
            before={"active_keys": sorted(k.prefix for k in old)},
            after={"active_keys": [record.prefix], "revoked": sorted(k.prefix for k in old)},
        )
    return record, key


def do_revoke_key(key, *, actor, reason: str = "") -> bool:
    """Revoke an ingest key, read token or billing token (cannot be undone).

    Returns False when it was already revoked (nothing written)."""
    require_account_team(actor)
    with transaction.atomic(durable=True):
        revoked = type(key).objects.filter(pk=key.pk, revoked=False).update(revoked=True)
        if not revoked:
            return False
        before = _key_snapshot(key) | {"revoked": False}
        key.refresh_from_db()
        _audit_key(actor, "revoke_key", key, reason=reason, before=before, after=_key_snapshot(key))
    return True


def do_create_read_token(customer: Customer, *, actor, reason: str = "") -> tuple[ReadToken, str]:
    """A further read token for a customer; returned once."""
    require_account_team(actor)
    with transaction.atomic(durable=True):
        record, key = ReadToken.objects.create_key(name=f"{customer.name} read", customer=customer)
        _audit_key(actor, "create_key", record, reason=reason, after=_key_snapshot(record))
    return record, key


def do_create_billing_token(*, name: str = "billing", actor=None, reason: str = ""):
    """A billing token (the credit export's only credential); returned once."""
    name = (name or "").strip()
    if not name or len(name) > 50:
        raise ActionError("a billing token needs a name of 1 to 50 characters")
    with transaction.atomic(durable=True):
        record, key = BillingToken.objects.create_key(name=name)
        _audit_key(actor, "create_key", record, reason=reason, after=_key_snapshot(record))
    return record, key
