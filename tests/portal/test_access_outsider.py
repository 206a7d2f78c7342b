"""Another customer's user gets 404 for our objects and never sees our data in lists or CSV."""

from tests.portal.conftest import body, private_urls


def test_outsider_gets_404_on_our_objects(demo, outsider):
    for url in private_urls(demo):
        assert outsider.get(url).status_code == 404, url


def test_outsider_lists_and_csv_hold_only_their_own(demo, other, outsider):
    listing = body(outsider.get("/incidents/"))
    assert "north/" in listing and "east/" not in listing
    # Filtering by our contract id is not a way in: the filter refuses the value.
    filtered = body(outsider.get(f"/incidents/?contract={demo.contract.pk}"))
    assert "east/" not in filtered
    rows = body(outsider.get(f"/incidents.csv?contract={demo.contract.pk}")).splitlines()[1:]
    assert rows and all(",north," in row for row in rows)
    years = body(outsider.get(f"/years.csv?contract={demo.contract.pk}")).splitlines()
    assert years == [years[0]]  # header only
    dashboard = body(outsider.get("/"))
    assert "Other Labs" in dashboard and "Acme AI" not in dashboard
    assert f'href="/contracts/{demo.contract.pk}/"' not in dashboard
    assert f'href="/contracts/{other.contract.pk}/"' in dashboard
