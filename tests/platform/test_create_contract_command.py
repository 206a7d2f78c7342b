"""create_contract prints one JSON line last with the keys, shown only once (SPEC 5)."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from yoco.accounts.models import ClusterKey, ReadToken
from yoco.guarantee.models import Contract, ContractYear


def _run(*args):
    out = StringIO()
    call_command("create_contract", *args, stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


BASE = ["--customer", "Acme", "--start", "2024-02-29", "--years", "3", "--annual-value",
        "1000.100", "--currency", "usd", "--cluster", "east", "--cluster", "west"]  # fmt: skip


@pytest.mark.django_db
def test_creates_contract_with_keys_and_years():
    out = _run(*BASE)
    assert set(out) == {"contract", "customer", "cluster_keys", "read_token"}
    assert set(out["cluster_keys"]) == {"east", "west"}
    contract = Contract.objects.get(pk=out["contract"])
    assert contract.currency == "USD" and contract.target == 90 and contract.credit_rate == 25
    assert contract.frameworks == ["torchtitan", "megatron-lm", "deepspeed", "pytorch"]
    assert contract.excluded_categories == ["software_user", "sdc"]
    ends = [y.end.date().isoformat() for y in ContractYear.objects.filter(contract=contract)]
    assert ends == ["2025-02-28", "2026-02-28", "2027-02-28"]
    key = out["cluster_keys"]["east"]
    assert ClusterKey.objects.get_from_key(key).cluster.name == "east"
    assert not ClusterKey.objects.filter(hashed_key__contains=key).exists()  # hashed
    assert ReadToken.objects.get_from_key(out["read_token"]).customer_id == out["customer"]


@pytest.mark.django_db
def test_options_replace_defaults():
    out = _run(*BASE, "--target", "92.5", "--credit-rate", "30", "--deadline-minutes", "10",
               "--grace-days", "3", "--exclude-category", "sdc", "--framework", "megatron-lm",
               "--framework", "pytorch")  # fmt: skip
    contract = Contract.objects.get(pk=out["contract"])
    assert str(contract.target.normalize()) == "92.5"
    assert contract.excluded_categories == ["sdc"]
    assert contract.frameworks == ["megatron-lm", "pytorch"]
    assert contract.deadline_minutes == 10 and contract.grace_days == 3


@pytest.mark.django_db
def test_existing_customer_reused_and_its_token_covers_all():
    first = _run(*BASE)
    second = _run("--customer", "Acme", "--start", "2027-03-01", "--years", "1",
                  "--annual-value", "5", "--currency", "EUR", "--cluster", "south")  # fmt: skip
    assert first["customer"] == second["customer"]


@pytest.mark.django_db
def test_cluster_of_another_customer_is_an_error():
    _run(*BASE)
    with pytest.raises(CommandError, match="another customer"):
        _run("--customer", "Other", "--start", "2024-01-01", "--years", "1", "--annual-value",
             "5", "--currency", "USD", "--cluster", "east")  # fmt: skip
    assert Contract.objects.count() == 1


@pytest.mark.parametrize(
    "change,message",
    [
        (("--annual-value", "1000.105"), "minor unit"),
        (("--currency", "XXY"), "currency"),
        (("--start", "2024-13-01"), "YYYY-MM-DD"),
        (("--years", "0"), "at least one year"),
        (("--target", "ninety"), "decimal"),
        (("--target", "120"), "percentage"),
        (("--exclude-category", "bad_luck"), "category"),
        (("--framework", "jax"), "framework"),
    ],
)
@pytest.mark.django_db
def test_bad_input_is_a_clear_error(change, message):
    args = list(BASE)
    name, value = change
    if name in args:
        args[args.index(name) + 1] = value
    else:
        args += [name, value]
    with pytest.raises(CommandError, match=message):
        _run(*args)
    assert Contract.objects.count() == 0
