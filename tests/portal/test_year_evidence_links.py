"""The contract page links a closed year's statement and verification, and an open year's
not (it has neither yet)."""

from tests.portal.conftest import body


def test_closed_years_link_their_statement_and_verification(demo, teammate):
    page = body(teammate.get(f"/contracts/{demo.contract.pk}/"))
    pk = demo.contract.pk
    assert f'href="/contracts/{pk}/years/1/statement.pdf"' in page
    assert f'href="/contracts/{pk}/years/1/verify"' in page
    assert f"/contracts/{pk}/years/2/statement.pdf" not in page
    assert f"/contracts/{pk}/years/2/verify" not in page
