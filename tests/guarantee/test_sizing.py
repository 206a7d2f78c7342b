"""The spare-sizing advisor (SPEC 4.9) against hand-computed Poisson and Clopper–Pearson values,
and its invariants over any history."""

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yoco.guarantee import sizing

# Poisson(1): P(N ≥ S) = 1 − e^-1 · Σ_{k<S} 1/k!, with e^-1 = 0.36787944117144233:
#   S=1: 1 − e^-1                          S=2: 1 − 2·e^-1
#   S=3: 1 − (5/2)·e^-1                    S=4: 1 − (8/3)·e^-1
#   S=5: 1 − (65/24)·e^-1                  S=6: 1 − (163/60)·e^-1
#   S=7: 1 − (1957/720)·e^-1
POISSON_1_AT_LEAST = [
    1.0,
    0.6321205588285577,
    0.26424111765711533,
    0.08030139707139416,
    0.01898815687615385,
    0.00365984682734366,
    0.0005941848175816666,
    0.00008324114928803805,
]

# 10 failures over 10,000 GPU-hours: λ = 0.001 / GPU-hour; G = 250 and T = 4 h give the
# Poisson mean λ·G·T = 1, and n = λ·G·8,760 = 2,190.
HISTORY = {"failures": 10, "gpu_hours": 10_000.0, "job_gpus": 250, "return_hours": 4}


def test_poisson_tail_matches_the_hand_computed_sums():
    for spares, expected in enumerate(POISSON_1_AT_LEAST):
        assert sizing.no_spare_probability(spares, 1.0) == pytest.approx(expected, rel=1e-9)
    assert sizing.no_spare_probability(0, 0.0) == 1.0
    assert sizing.no_spare_probability(1, 0.0) == 0.0


def test_the_table_and_the_recommendation_for_a_known_history():
    advice = sizing.advise(**HISTORY, live_resolved=10, target=Decimal("99.8"))
    assert advice.failure_rate == pytest.approx(0.001)
    assert advice.spares_in_use == pytest.approx(1.0)
    assert advice.yearly_failures == pytest.approx(2190)
    assert advice.trials == 2190
    assert advice.live_share == 1.0
    for option, expected in zip(advice.options, POISSON_1_AT_LEAST, strict=False):
        assert option.no_spare == pytest.approx(expected, rel=1e-9)
        assert option.live_rate == pytest.approx(1 - expected, rel=1e-9)
    # S = 6: 2,190 × (1 − 0.000594185) = 2,188.70 → 2,189 of 2,190, whose lower bound is below
    # 0.998 (about 1 − 5.57/2,190 = 0.99746, from the χ²₄ 97.5 % point 11.14 / 2).
    assert advice.options[6].successes == 2189
    assert not advice.options[6].reaches_target
    # S = 7: 2,190 × (1 − 0.0000832) = 2,189.82 → 2,190 of 2,190: with every trial a success
    # the Clopper–Pearson lower bound is (α/2)^(1/n) = 0.025^(1/2190) = e^(ln 0.025 / 2190).
    assert advice.options[7].successes == 2190
    assert advice.options[7].lower == pytest.approx(0.9983169979968506, rel=1e-9)
    assert advice.recommended == 7
    assert advice.confident


def test_a_live_share_below_one_scales_every_rate():
    # 9 of 10 past failures live: q = 0.9, p_S = (1 − P_S) · 0.9.
    advice = sizing.advise(**HISTORY, live_resolved=9, target=Decimal("80"))
    assert advice.live_share == 0.9
    assert not sizing.advise(**HISTORY, live_resolved=8, target=Decimal(90)).target_reachable
    assert advice.options[2].live_rate == pytest.approx((1 - 0.26424111765711533) * 0.9)
    # 2,190 × 0.9 × (1 − 0.0803014) = 1,812.70 → 1,813 successes at S = 3.
    assert advice.options[3].successes == 1813


def test_no_s_reaching_the_target_falls_back_to_one_percent():
    # Even 2,190 of 2,190 gives a lower bound of 0.99832 < 0.999: nothing is certain enough;
    # the smallest S with P_S ≤ 1 % is 5 (P_4 = 0.019, P_5 = 0.0037).
    advice = sizing.advise(**HISTORY, live_resolved=10, target=Decimal("99.9"))
    assert not any(o.reaches_target for o in advice.options)
    assert not advice.confident
    assert advice.recommended == 5


def test_no_history_means_one_expected_failure_and_no_certainty():
    # λ = 0: N is always 0, n = max(1, 0) = 1, q = 1; one success out of one has a lower
    # bound of 0.025^(1/1) = 0.025 < 0.9, so the fallback: the smallest S with P_S ≤ 1 % is 1.
    advice = sizing.advise(
        failures=0, gpu_hours=0.0, live_resolved=0, job_gpus=8, return_hours=4, target=Decimal(90)
    )
    assert (advice.failure_rate, advice.trials, advice.live_share) == (0.0, 1, 1.0)
    assert advice.options[1].lower == pytest.approx(0.025)
    assert (advice.recommended, advice.confident) == (1, False)


def test_past_the_table_the_fallback_still_finds_one_percent():
    # A Poisson mean of 10 (λ·G·T = 0.001 × 2,500 × 4): P(N ≥ S) ≤ 1 % first at S = 19
    # (P(N ≤ 17) = 0.98572, P(N ≤ 18) = 0.99281, partial sums of e^-10 · 10^k / k!).
    advice = sizing.advise(**{**HISTORY, "job_gpus": 2500}, live_resolved=9, target=Decimal(90))
    assert not advice.confident and advice.recommended == 19
    assert advice.target_reachable  # q = 0.9 is the target itself
    assert sizing.no_spare_probability(19, 10.0) == pytest.approx(1 - 0.99281, abs=1e-5)


def test_halves_round_up():
    assert [sizing.round_half_up(x) for x in (0.5, 1.5, 2.5, 2.49)] == [1, 2, 3, 2]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"job_gpus": 0},
        {"return_hours": 0},
        {"live_resolved": 11},
        {"gpu_hours": -1.0},
    ],
)
def test_impossible_inputs_are_refused(kwargs):
    with pytest.raises(ValueError):
        sizing.advise(**{**HISTORY, "live_resolved": 10, "target": Decimal(90), **kwargs})


@given(
    failures=st.integers(0, 10_000),
    live_fraction=st.fractions(0, 1),
    gpu_hours=st.just(0.0) | st.floats(1, 1e9),  # none, or at least one GPU-hour
    job_gpus=st.integers(1, 100_000),
    return_hours=st.decimals("0.25", "720", places=2),
    target=st.decimals("0", "100", places=2),
)
def test_the_advice_is_consistent_for_any_history(
    failures, live_fraction, gpu_hours, job_gpus, return_hours, target
):
    live = int(failures * live_fraction)
    advice = sizing.advise(
        failures=failures,
        gpu_hours=gpu_hours,
        live_resolved=live,
        job_gpus=job_gpus,
        return_hours=return_hours,
        target=target,
    )
    options = advice.options
    assert [o.spares for o in options] == list(range(sizing.MAX_SPARES + 1))
    assert options[0].no_spare == 1.0 and options[0].live_rate == 0.0
    assert advice.trials >= 1
    for fewer, more in zip(options, options[1:], strict=False):
        assert 0 <= more.no_spare <= fewer.no_spare <= 1  # a spare more never hurts
        assert fewer.live_rate <= more.live_rate <= advice.live_share
        assert fewer.successes <= more.successes <= advice.trials
    for option in options:
        assert 0 <= option.lower <= option.successes / advice.trials
        assert option.reaches_target == (option.lower >= float(target) / 100)
    if advice.confident:
        assert options[advice.recommended].reaches_target
        assert not any(o.reaches_target for o in options[: advice.recommended])
    else:
        assert not any(o.reaches_target for o in options)
        # The smallest S with P_S ≤ 1 %, past the table's 8 when need be.
        chosen = advice.recommended
        assert sizing.no_spare_probability(chosen, advice.spares_in_use) <= 0.01
        assert sizing.no_spare_probability(chosen - 1, advice.spares_in_use) > 0.01
