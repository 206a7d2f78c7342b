"""The contract page and the dashboard's year view link a closed year's statement and
verification, and an open year's not (it has neither yet)."""

from tests.portal.conftest import body


def test_closed_years_link_their_statement_and_verification(demo, teammate):
    page = body(teammate.get(f"/contracts/{demo.contract.pk}/"))
    pk = demo.contract.pk
    assert f'href="/contracts/{pk}/years/1/statement.pdf"' in page
    assert f'href="/contracts/{pk}/years/1/verify"' in page
    assert f"/contracts/{pk}/years/2/statement.pdf" not in page
    assert f"/contracts/{pk}/years/2/verify" not in page


def test_the_dashboard_links_them_for_a_closed_year_only(demo, owner):
    pk = demo.contract.pk
    closed = body(owner.get(f"/?contract={pk}&year=1"))
    assert f'href="/contracts/{pk}/years/1/statement.pdf"' in closed
    assert f'href="/contracts/{pk}/years/1/verify"' in closed
    assert "statement.pdf" not in body(owner.get(f"/?contract={pk}&year=2"))
