"""The audit trail's hash chain: each AuditRecord holds the SHA-256 of its own content and of
the record before it, so a record changed, removed or slipped in afterwards breaks the chain
at that record (`manage.py verify_audit` walks it).

Pure functions over plain values: `accounts.actions.audit` (every record's one writer), the
migration that chained the records made before the chain, and the verifier share them.
"""

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

# The hash before the first record.
GENESIS = "0" * 64


def record_hash(
    *,
    pk: int,
    at: datetime,
    actor_id: int | None,
    actor_label: str,
    action: str,
    object_type: str,
    object_id: str,
    reason: str,
    before,
    after,
    previous_hash: str,
) -> str:
    """SHA-256 of a record's content (canonical JSON: sorted keys, UTC time) and its
    predecessor's hash."""
    content = {
        "id": pk,
        "at": at.astimezone(UTC).isoformat(),
        "actor_id": actor_id,
        "actor_label": actor_label,
        "action": action,
        "object_type": object_type,
        "object_id": object_id,
        "reason": reason,
        "before": before,
        "after": after,
        "previous_hash": previous_hash,
    }
    return canonical_sha256(content)


def canonical_sha256(content) -> str:
    """SHA-256 of JSON-able ``content`` written canonically (sorted keys, no spaces, UTF-8), so
    that it hashes the same after a round trip through the database."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def content_of(record) -> dict:
    """The hashed fields of an AuditRecord (or of the migration's historical model)."""
    return {
        "pk": record.pk,
        "at": record.at,
        "actor_id": record.actor_id,
        "actor_label": record.actor_label,
        "action": record.action,
        "object_type": record.object_type,
        "object_id": record.object_id,
        "reason": record.reason,
        "before": record.before,
        "after": record.after,
        "previous_hash": record.previous_hash,
    }


@dataclass(frozen=True)
class Break:
    pk: int
    problem: str


def first_break(records: Iterable) -> Break | None:
    """The first record (in id order) whose stored hashes do not match its content or its
    predecessor; None when the chain is whole."""
    expected_previous = GENESIS
    for record in records:
        if record.previous_hash != expected_previous:
            return Break(record.pk, "does not follow the record before it (a record was "
                         "removed or inserted, or a hash changed)")  # fmt: skip
        if record.hash != record_hash(**content_of(record)):
            return Break(record.pk, "its content no longer matches its hash (changed)")
        expected_previous = record.hash
    return None
