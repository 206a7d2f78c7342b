"""`Authorization: Bearer <key>` against one of the hashed-key tables.

Each endpoint names the table (scope) it accepts; a key of another scope is refused with 403,
an unknown or revoked key with 401.
"""

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

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
