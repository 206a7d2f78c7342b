"""The annual statement of a closed year is the customer's alone: its owner and teammate download
it, another customer gets a 404, an open year has none (404), and a visitor must sign in."""

import pytest


def statement(data, number=1):
    return f"/contracts/{data.contract.pk}/years/{number}/statement.pdf"


@pytest.mark.parametrize("visitor", ["owner", "teammate"])
def test_the_customers_users_download_it(demo, visitor, request):
    response = request.getfixturevalue(visitor).get(statement(demo))
    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"


def test_another_customer_gets_404(demo, outsider):
    assert outsider.get(statement(demo)).status_code == 404


def test_an_open_or_unknown_year_has_none(demo, owner):
    assert owner.get(statement(demo, 2)).status_code == 404  # open
    assert owner.get(statement(demo, 9)).status_code == 404


def test_a_visitor_must_sign_in(demo, anonymous):
    response = anonymous.get(statement(demo))
    assert response.status_code == 302 and "/login" in response["Location"]
