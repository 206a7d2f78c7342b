"""The account team sees a closed year's and its credit's evidence hash in the admin: the one
the audit records of the closing and the earning hold."""

from tests.platform.account_team import staff
from tests.platform.closed_year import close_missed_year
from yoco.accounts.models import AuditRecord


def test_the_admin_shows_the_evidence_hash(acme, api, client):
    closed = close_missed_year(api, acme)
    audited = AuditRecord.objects.get(action="earn_credit").after["evidence_hash"]
    client.force_login(staff("carol"))
    for url in (
        f"/admin/guarantee/contractyear/{closed.year.pk}/change/",
        f"/admin/guarantee/credit/{closed.credit.pk}/change/",
    ):
        page = client.get(url)
        assert page.status_code == 200 and audited.encode() in page.content, url
