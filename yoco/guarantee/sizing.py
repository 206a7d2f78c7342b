"""The spare-sizing advisor (SPEC 4.9) as pure functions.

From a contract's own history (eligible unplanned and pre-emptive failures, the GPU-hours its
jobs ran, the share resolved live) it tells how many standby spares a job of G GPUs needs:
failures arrive at rate λ·G per hour (a Poisson process), a failed worker is out of service
for T hours, so the spares in use N ~ Poisson(λ·G·T) and a failure finds none with probability
P_S = P(N ≥ S). The expected live-resolution rate with S spares is p_S = (1 − P_S)·q, and S is
recommended when the 95 % Clopper–Pearson lower bound of round(n·p_S) successes out of round(n)
(n = a contract year's expected eligible failures) reaches the target.

Nothing here touches Django; floats are fine: everything here is advice, never a result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from yoco.guarantee.rules import clopper_pearson

DEFAULT_SPARE_RETURN_HOURS = Decimal("4")
HOURS_PER_YEAR = 8760
MAX_SPARES = 8
# With no S certain to reach the target, the advice falls back to this chance of no spare.
FALLBACK_NO_SPARE = 0.01
CONFIDENCE = 0.95


@dataclass(frozen=True)
class SpareOption:
    spares: int  # S
    no_spare: float  # P_S = P(N ≥ S)
    live_rate: float  # p_S = (1 − P_S)·q
    successes: int  # round(n·p_S)
    lower: float  # the Clopper–Pearson lower bound of successes out of round(n)
    reaches_target: bool


@dataclass(frozen=True)
class Advice:
    failure_rate: float  # λ, eligible failures per GPU-hour
    job_gpus: int  # G
    return_hours: float  # T
    live_share: float  # q
    yearly_failures: float  # n
    trials: int  # round(n)
    spares_in_use: float  # λ·G·T, the mean of N
    options: list[SpareOption]
    recommended: int  # may exceed MAX_SPARES when not confident
    # False when no S reached the target: the recommendation is the fallback (P_S ≤ 1 %).
    confident: bool
    # False when q itself is below the target: no number of spares can reach it.
    target_reachable: bool


def round_half_up(value: float) -> int:
    """SPEC 4.9's round(): halves go up (Python's round() would take them to even)."""
    return math.floor(value + 0.5)


def failure_rate(failures: int, gpu_hours: float) -> float:
    """λ: failures per GPU-hour; 0 without any GPU-hours of history."""
    if failures < 0 or gpu_hours < 0:
        raise ValueError("failures and GPU-hours cannot be negative")
    return failures / gpu_hours if gpu_hours > 0 else 0.0


def live_share(live_resolved: int, eligible: int) -> float:
    """q: the share of past eligible failures resolved live; 1 with no history."""
    if not 0 <= live_resolved <= eligible:
        raise ValueError(f"need 0 <= live_resolved <= eligible, got {live_resolved} of {eligible}")
    return live_resolved / eligible if eligible else 1.0


def no_spare_probability(spares: int, mean: float) -> float:
    """P_S = P(N ≥ S) for N ~ Poisson(mean)."""
    if spares < 0 or mean < 0:
        raise ValueError("spares and the mean cannot be negative")
    if spares == 0:
        return 1.0
    from scipy.stats import poisson  # imported lazily: scipy is slow to import

    return float(poisson.sf(spares - 1, mean))


def spares_for_no_spare_at_most(chance: float, mean: float) -> int:
    """The smallest S with P(N ≥ S) ≤ `chance`, N ~ Poisson(mean): P(N ≤ S − 1) ≥ 1 − chance,
    so S − 1 is the (1 − chance) quantile. May exceed MAX_SPARES."""
    from scipy.stats import poisson

    return int(poisson.ppf(1 - chance, mean)) + 1


def advise(
    *,
    failures: int,
    gpu_hours: float,
    live_resolved: int,
    job_gpus: int,
    return_hours: float | Decimal,
    target: Decimal,
) -> Advice:
    """The advice for a job of `job_gpus` GPUs from the history: `failures` eligible
    unplanned and pre-emptive failures (`live_resolved` of them live) over `gpu_hours`."""
    if job_gpus < 1:
        raise ValueError("a job has at least one GPU")
    hours = float(return_hours)
    if not hours > 0:
        raise ValueError("the return time must be positive")
    rate = failure_rate(failures, gpu_hours)
    share = live_share(live_resolved, failures)
    mean = rate * job_gpus * hours
    yearly = max(1.0, rate * job_gpus * HOURS_PER_YEAR)
    trials = round_half_up(yearly)
    goal = float(target) / 100
    options = []
    for spares in range(MAX_SPARES + 1):
        no_spare = no_spare_probability(spares, mean)
        live_rate = (1 - no_spare) * share
        successes = round_half_up(yearly * live_rate)  # ≤ trials: p_S ≤ 1
        lower = clopper_pearson(successes, trials, CONFIDENCE)[0]
        options.append(
            SpareOption(spares, no_spare, live_rate, successes, lower, reaches_target=lower >= goal)
        )
    reaching = [o.spares for o in options if o.reaches_target]
    if reaching:
        recommended, confident = reaching[0], True
    else:
        recommended, confident = spares_for_no_spare_at_most(FALLBACK_NO_SPARE, mean), False
    return Advice(
        failure_rate=rate,
        job_gpus=job_gpus,
        return_hours=hours,
        live_share=share,
        yearly_failures=yearly,
        trials=trials,
        spares_in_use=mean,
        options=options,
        recommended=recommended,
        confident=confident,
        target_reachable=share >= goal,
    )
