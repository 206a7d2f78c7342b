"""Who is asking: `Authorization: Bearer <key>` against one of the hashed-key tables, and the
permissions of the API views built on it.

Each endpoint names the table (scope) it accepts; a key of another scope is refused with 403,
an unknown or revoked key with 401.
"""

from rest_framework import exceptions, permissions
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    get_authorization_header,
)

from yoco.accounts.models import BillingToken, ClusterKey, ReadToken

SCOPES = {"ingest": ClusterKey, "read": ReadToken, "billing": BillingToken}


def bearer_key(request) -> str | None:
    header = get_authorization_header(request).decode("latin-1").strip()
    if not header:
        return None
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise exceptions.AuthenticationFailed("use 'Authorization: Bearer <key>'")
    return key.strip()


def find_key(key: str):
    """The usable key record for `key` in any scope, with its scope name, or (None, None)."""
    for scope, model in SCOPES.items():
        try:
            record = model.objects.get_from_key(key)
        except model.DoesNotExist:
            continue
        if not record.has_expired:
            return scope, record
    return None, None


class BearerKeyAuthentication(BaseAuthentication):
    """Authenticates with a key of `scope`; request.auth is the key record."""

    scope = "read"

    def authenticate(self, request):
        key = bearer_key(request)
        if key is None:
            return None
        scope, record = find_key(key)
        if record is None:
            raise exceptions.AuthenticationFailed("unknown, revoked or expired key")
        if scope != self.scope:
            raise exceptions.PermissionDenied(f"a {scope} key cannot be used here")
        return (None, record)

    def authenticate_header(self, request):
        return 'Bearer realm="yoco"'


class IngestKeyAuthentication(BearerKeyAuthentication):
    scope = "ingest"


class ReadKeyAuthentication(BearerKeyAuthentication):
    scope = "read"


class BillingKeyAuthentication(BearerKeyAuthentication):
    scope = "billing"


class CustomerReadAccess(permissions.BasePermission):
    """A customer read token, or a logged-in portal user; sets `request.customer`."""

    def has_permission(self, request, view):
        record = request.auth
        if record is not None and hasattr(record, "customer_id"):
            request.customer = record.customer
            return True
        user = request.user
        membership = getattr(user, "membership", None) if user else None
        if user is not None and user.is_authenticated and membership is not None:
            request.customer = membership.customer
            return True
        if record is None and not (user and user.is_authenticated):
            raise exceptions.NotAuthenticated("send 'Authorization: Bearer <read token>'")
        return False


class BillingAccess(permissions.BasePermission):
    def has_permission(self, request, view):
        if request.auth is None:
            raise exceptions.NotAuthenticated("send 'Authorization: Bearer <billing token>'")
        return True


READ_AUTHENTICATION = [ReadKeyAuthentication, SessionAuthentication]
BILLING_AUTHENTICATION = [BillingKeyAuthentication]
