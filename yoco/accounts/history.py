"""An object's audit records as the account-team admin shows them."""

from django.urls import reverse
from django.utils.html import format_html, format_html_join

from yoco.accounts.models import AuditRecord


def audit_history(object_type: str, object_id) -> str:
    """The object's audit records as an HTML table, newest first, with a link to all of them."""
    records = AuditRecord.objects.filter(object_type=object_type, object_id=str(object_id))[:50]
    link = (
        reverse("admin:accounts_auditrecord_changelist")
        + f"?object_type={object_type}&object_id={object_id}"
    )
    if not records:
        return format_html('<a href="{}">no audit records</a>', link)
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td>"
        "<td><code>{}</code></td></tr>",
        (
            (
                f"{r.at:%Y-%m-%d %H:%M:%S}",
                r.actor_label,
                r.action,
                r.reason,
                r.before,
                r.after,
            )
            for r in records
        ),
    )
    return format_html(
        "<table><thead><tr><th>when</th><th>who</th><th>what</th><th>why</th><th>before</th>"
        '<th>after</th></tr></thead><tbody>{}</tbody></table><a href="{}">all records</a>',
        rows,
        link,
    )
