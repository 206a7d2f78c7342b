"""Savings scenarios for the benchmarks and the docs: whole jobs under a stated failure rate.

Builds on the platform's savings model (yoco/lib/savings.py: the per-failure loss, validation
and formatting) and adds what only bench/render.py, bench/goodput.py and the tests use: failure
rates and MTTFs, the Young/Daly interval, one-job comparisons and the GPU-count scaling table.

Model
    * Failures arrive at a constant rate: ``failures/day = 24 h / MTTF``. The MTTF of a job is
      entered directly, or derived from a failure rate per node-day
      (``MTTF = 24 / (rate × nodes)``) or per GPU-hour (``MTTF = 1 / (rate × GPUs)``), so the
      MTTF scales inversely with the GPU count.
    * Each failure costs checkpoint-restart half an interval plus a restart, live migration its
      downtime, on every GPU. Optionally, each checkpoint also blocks training for
      ``checkpoint_write_seconds`` (default 0, as in the published figure).
    * Lost GPU-hours = lost wall hours × GPUs; per year = per day × 365; cost = GPU-hours ×
      the GPU-hour price.
    * This is the first-order model behind the published figures: it does not let failures
      strike during lost time. Once a strategy's loss reaches 24 h a day
      (:attr:`StrategyLoss.saturated`) the job effectively stops making progress, and the
      figure only says so; :func:`format_table` marks such rows.

Published figures it reproduces (tests/lib/test_savings.py)
    A 1,024-GPU job with an MTTF of 7.9 h, a checkpoint every 1.5 h and a 15-minute restart
    has 24 / 7.9 = 3.04 failures a day, each costing 0.75 h + 0.25 h = 1 h: about 3.04 h a day
    lost to checkpoint-restart; with ~3-minute live recoveries 3.04 × 3 min = 9.1 min a day.
    At 16,384 GPUs the published MTTF is about 1.8 h (24 / 1.8 = 13.3 h a day lost to
    checkpoint-restart). Note that these two published MTTFs do not scale inversely with each
    other (7.9 h × 1,024 / 16,384 = 0.49 h, not 1.8 h): the table (:func:`scaling_table`)
    takes a per-GPU failure rate, or a reference (GPUs, MTTF) pair to derive one from, and
    states which in its assumptions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from yoco.lib.savings import (
    DEFAULT_CHECKPOINT_INTERVAL_HOURS,
    DEFAULT_RESTART_MINUTES,
    MINUTES_PER_HOUR,
    SECONDS_PER_HOUR,
    Number,
    checkpoint_restart_loss_hours,
    decimal_of,
    fmt,
    non_negative,
    positive,
    whole_number,
)

HOURS_PER_DAY = Decimal(24)
DAYS_PER_YEAR = Decimal(365)

DEFAULT_LIVE_DOWNTIME_SECONDS = Decimal(180)
DEFAULT_GPUS_PER_NODE = 8
DEFAULT_TABLE_GPUS = (1024, 2048, 4096, 8192, 16384)


# --------------------------------------------------------------------------- failure rates


def failures_per_day(mttf_hours: Number) -> Decimal:
    """Expected failures per day of a job with the given mean time to failure (hours)."""
    return HOURS_PER_DAY / positive(mttf_hours, "mttf_hours")


def mttf_from_node_day_rate(
    failures_per_node_day: Number, gpus: int, *, gpus_per_node: int = DEFAULT_GPUS_PER_NODE
) -> Decimal:
    """MTTF (hours) of a job on ``gpus`` GPUs when each node fails ``failures_per_node_day``
    times a day: ``24 / (rate × gpus / gpus_per_node)``. A partial node counts as a node."""
    rate = positive(failures_per_node_day, "failures_per_node_day")
    gpus = whole_number(gpus, "gpus")
    gpus_per_node = whole_number(gpus_per_node, "gpus_per_node")
    nodes = Decimal(math.ceil(gpus / gpus_per_node))
    return HOURS_PER_DAY / (rate * nodes)


def mttf_from_per_gpu_rate(failures_per_gpu_hour: Number, gpus: int) -> Decimal:
    """MTTF (hours) of a job on ``gpus`` GPUs, each failing ``failures_per_gpu_hour`` times an
    hour: ``1 / (rate × gpus)`` (MTTF inversely proportional to the GPU count)."""
    rate = positive(failures_per_gpu_hour, "failures_per_gpu_hour")
    return 1 / (rate * whole_number(gpus, "gpus"))


def per_gpu_rate_from_mttf(mttf_hours: Number, gpus: int) -> Decimal:
    """Failures per GPU-hour implied by a job's MTTF: ``1 / (MTTF × gpus)``."""
    return 1 / (positive(mttf_hours, "mttf_hours") * whole_number(gpus, "gpus"))


def young_daly_interval_hours(checkpoint_cost_seconds: Number, mttf_hours: Number) -> Decimal:
    """The Young/Daly first-order optimal checkpoint interval, ``sqrt(2 × C × MTTF)``, in hours,
    for a checkpoint that blocks training ``checkpoint_cost_seconds``."""
    cost_h = positive(checkpoint_cost_seconds, "checkpoint_cost_seconds") / SECONDS_PER_HOUR
    return (2 * cost_h * positive(mttf_hours, "mttf_hours")).sqrt()


# --------------------------------------------------------------------------- scenario


@dataclass(frozen=True)
class Scenario:
    """The stated assumptions of one comparison. Every field is a Decimal once constructed
    (``gpus`` an int); units are in the names."""

    gpus: int
    mttf_hours: Decimal
    checkpoint_interval_hours: Decimal = DEFAULT_CHECKPOINT_INTERVAL_HOURS
    restart_minutes: Decimal = DEFAULT_RESTART_MINUTES
    live_downtime_seconds: Decimal = DEFAULT_LIVE_DOWNTIME_SECONDS
    gpu_hour_price: Decimal = Decimal(0)
    checkpoint_write_seconds: Decimal = Decimal(0)
    currency: str = "USD"
    mttf_source: str = field(default="entered", compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "gpus", whole_number(self.gpus, "gpus"))
        set_(self, "mttf_hours", positive(self.mttf_hours, "mttf_hours"))
        set_(
            self,
            "checkpoint_interval_hours",
            positive(self.checkpoint_interval_hours, "checkpoint_interval_hours"),
        )
        set_(self, "restart_minutes", non_negative(self.restart_minutes, "restart_minutes"))
        set_(
            self,
            "live_downtime_seconds",
            non_negative(self.live_downtime_seconds, "live_downtime_seconds"),
        )
        set_(self, "gpu_hour_price", non_negative(self.gpu_hour_price, "gpu_hour_price"))
        set_(
            self,
            "checkpoint_write_seconds",
            non_negative(self.checkpoint_write_seconds, "checkpoint_write_seconds"),
        )
        if self.checkpoint_write_seconds / SECONDS_PER_HOUR >= self.checkpoint_interval_hours:
            raise ValueError(
                "checkpoint_write_seconds must be shorter than the checkpoint interval, got "
                f"{self.checkpoint_write_seconds} s for a {self.checkpoint_interval_hours} h "
                "interval"
            )
        if not isinstance(self.currency, str) or not self.currency.strip():
            raise ValueError(f"currency must be a non-empty code, got {self.currency!r}")

    @classmethod
    def from_node_day_rate(
        cls,
        gpus: int,
        failures_per_node_day: Number,
        *,
        gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
        **assumptions: object,
    ) -> Scenario:
        """A scenario whose MTTF comes from a failure rate per node-day."""
        mttf = mttf_from_node_day_rate(failures_per_node_day, gpus, gpus_per_node=gpus_per_node)
        rate = decimal_of(failures_per_node_day, "rate")
        source = f"{rate} failures/node-day, {gpus_per_node} GPUs/node"
        return cls(gpus=gpus, mttf_hours=mttf, mttf_source=source, **assumptions)  # type: ignore[arg-type]

    @classmethod
    def from_per_gpu_rate(
        cls, gpus: int, failures_per_gpu_hour: Number, **assumptions: object
    ) -> Scenario:
        """A scenario whose MTTF comes from a failure rate per GPU-hour."""
        mttf = mttf_from_per_gpu_rate(failures_per_gpu_hour, gpus)
        source = f"{decimal_of(failures_per_gpu_hour, 'rate'):.4E} failures/GPU-hour"
        return cls(gpus=gpus, mttf_hours=mttf, mttf_source=source, **assumptions)  # type: ignore[arg-type]

    @property
    def failures_per_day(self) -> Decimal:
        return HOURS_PER_DAY / self.mttf_hours

    @property
    def restart_hours(self) -> Decimal:
        return self.restart_minutes / MINUTES_PER_HOUR

    @property
    def checkpoint_restart_loss_per_failure_hours(self) -> Decimal:
        """Half a checkpoint interval of lost work plus the restart."""
        return checkpoint_restart_loss_hours(self.checkpoint_interval_hours, self.restart_minutes)

    @property
    def live_loss_per_failure_hours(self) -> Decimal:
        return self.live_downtime_seconds / SECONDS_PER_HOUR

    @property
    def checkpoint_write_hours_per_day(self) -> Decimal:
        """Training time blocked by writing checkpoints (0 unless checkpoint_write_seconds)."""
        per_checkpoint = self.checkpoint_write_seconds / SECONDS_PER_HOUR
        return HOURS_PER_DAY / self.checkpoint_interval_hours * per_checkpoint


@dataclass(frozen=True)
class StrategyLoss:
    """What one recovery strategy loses under a scenario."""

    strategy: str  # "checkpoint_restart" or "live_migration"
    loss_per_failure_hours: Decimal  # wall hours of the whole job, per failure
    overhead_hours_per_day: Decimal  # failure-independent losses (checkpoint writes)
    lost_wall_hours_per_day: Decimal
    lost_gpu_hours_per_day: Decimal
    lost_gpu_hours_per_year: Decimal
    cost_per_day: Decimal
    cost_per_year: Decimal

    @property
    def lost_wall_minutes_per_day(self) -> Decimal:
        return self.lost_wall_hours_per_day * MINUTES_PER_HOUR

    @property
    def lost_fraction(self) -> Decimal:
        """Share of the job's wall time lost (1 − this is its goodput from failures alone)."""
        return self.lost_wall_hours_per_day / HOURS_PER_DAY

    @property
    def saturated(self) -> bool:
        """True when the first-order model loses a whole day or more per day: failures come
        faster than this strategy recovers, and the job makes (almost) no progress at all."""
        return self.lost_wall_hours_per_day >= HOURS_PER_DAY


@dataclass(frozen=True)
class Comparison:
    """Checkpoint-restart against live migration under one scenario."""

    scenario: Scenario
    failures_per_day: Decimal
    checkpoint_restart: StrategyLoss
    live_migration: StrategyLoss

    @property
    def saved_gpu_hours_per_day(self) -> Decimal:
        return (
            self.checkpoint_restart.lost_gpu_hours_per_day
            - self.live_migration.lost_gpu_hours_per_day
        )

    @property
    def saved_gpu_hours_per_year(self) -> Decimal:
        return self.saved_gpu_hours_per_day * DAYS_PER_YEAR

    @property
    def saved_cost_per_year(self) -> Decimal:
        return self.checkpoint_restart.cost_per_year - self.live_migration.cost_per_year

    def assumptions(self) -> str:
        """The stated assumptions, one line."""
        s = self.scenario
        return (
            f"{s.gpus:,} GPUs, MTTF {fmt(s.mttf_hours, 2)} h ({s.mttf_source}), "
            f"checkpoint every {fmt(s.checkpoint_interval_hours, 2)} h, "
            f"restart {fmt(s.restart_minutes, 1)} min, "
            f"live recovery {fmt(s.live_downtime_seconds, 0)} s, "
            f"{fmt(s.gpu_hour_price, 4)} {s.currency}/GPU-hour"
            + (
                f", checkpoint write {fmt(s.checkpoint_write_seconds, 0)} s"
                if s.checkpoint_write_seconds
                else ""
            )
        )

    def formula(self) -> str:
        """How the daily figures were computed, human-readable."""
        s = self.scenario
        f = fmt(self.failures_per_day, 2)
        cr = self.checkpoint_restart
        lm = self.live_migration
        text = (
            f"failures/day = 24 h ÷ {fmt(s.mttf_hours, 2)} h = {f}; "
            f"checkpoint-restart: {f} × ({fmt(s.checkpoint_interval_hours, 2)} h ÷ 2 + "
            f"{fmt(s.restart_minutes, 1)} min) = {fmt(cr.lost_wall_hours_per_day, 2)} h/day"
        )
        if cr.overhead_hours_per_day:
            text += f" (incl. {fmt(cr.overhead_hours_per_day, 2)} h of checkpoint writes)"
        text += (
            f"; live migration: {f} × {fmt(s.live_downtime_seconds, 0)} s = "
            f"{fmt(lm.lost_wall_minutes_per_day, 1)} min/day; "
            f"× {s.gpus:,} GPUs for GPU-hours"
        )
        return text


def _strategy(
    name: str, scenario: Scenario, per_failure_h: Decimal, overhead_h: Decimal
) -> StrategyLoss:
    wall = scenario.failures_per_day * per_failure_h + overhead_h
    gpu_day = wall * scenario.gpus
    return StrategyLoss(
        strategy=name,
        loss_per_failure_hours=per_failure_h,
        overhead_hours_per_day=overhead_h,
        lost_wall_hours_per_day=wall,
        lost_gpu_hours_per_day=gpu_day,
        lost_gpu_hours_per_year=gpu_day * DAYS_PER_YEAR,
        cost_per_day=gpu_day * scenario.gpu_hour_price,
        cost_per_year=gpu_day * DAYS_PER_YEAR * scenario.gpu_hour_price,
    )


def compare(scenario: Scenario) -> Comparison:
    """Losses of checkpoint-restart and of live migration under ``scenario``."""
    if not isinstance(scenario, Scenario):
        raise ValueError(f"compare() needs a Scenario, got {type(scenario).__name__}")
    return Comparison(
        scenario=scenario,
        failures_per_day=scenario.failures_per_day,
        checkpoint_restart=_strategy(
            "checkpoint_restart",
            scenario,
            scenario.checkpoint_restart_loss_per_failure_hours,
            scenario.checkpoint_write_hours_per_day,
        ),
        live_migration=_strategy(
            "live_migration", scenario, scenario.live_loss_per_failure_hours, Decimal(0)
        ),
    )


def scaling_table(
    gpu_counts: Iterable[int] = DEFAULT_TABLE_GPUS,
    *,
    failures_per_gpu_hour: Number | None = None,
    reference_gpus: int = 1024,
    reference_mttf_hours: Number = Decimal("7.9"),
    **assumptions: object,
) -> list[Comparison]:
    """One comparison per GPU count, the MTTF scaling inversely with the GPU count.

    The per-GPU failure rate is ``failures_per_gpu_hour`` when given, else derived from the
    reference job (default: the published 1,024 GPUs at 7.9 h). ``assumptions`` are the other
    :class:`Scenario` fields (interval, restart, downtime, price, ...).
    """
    if failures_per_gpu_hour is None:
        rate = per_gpu_rate_from_mttf(reference_mttf_hours, reference_gpus)
        source = (
            f"scaled from {whole_number(reference_gpus, 'reference_gpus'):,} GPUs at "
            f"{fmt(decimal_of(reference_mttf_hours, 'reference_mttf_hours'), 2)} h"
        )
    else:
        rate = positive(failures_per_gpu_hour, "failures_per_gpu_hour")
        source = f"{rate:.4E} failures/GPU-hour"
    counts = list(gpu_counts)
    if not counts:
        raise ValueError("gpu_counts must name at least one GPU count")
    rows = []
    for gpus in counts:
        scenario = Scenario.from_per_gpu_rate(gpus, rate, **assumptions)
        rows.append(compare(replace(scenario, mttf_source=source)))
    return rows


# --------------------------------------------------------------------------- formatting


def format_table(rows: Sequence[Comparison]) -> str:
    """A Markdown table of a scaling table (for docs/benchmarks.md)."""
    if not rows:
        raise ValueError("format_table needs at least one row")
    currency = rows[0].scenario.currency
    header = (
        "| GPUs | MTTF (h) | failures/day | checkpoint-restart lost h/day | live lost min/day "
        f"| C-R GPU-h/year | live GPU-h/year | saved GPU-h/year | saved {currency}/year |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for r in rows:
        cr, lm = r.checkpoint_restart, r.live_migration
        cells = [
            f"{r.scenario.gpus:,}",
            fmt(r.scenario.mttf_hours, 2, fixed=True),
            fmt(r.failures_per_day, 2, fixed=True),
            fmt(cr.lost_wall_hours_per_day, 2, fixed=True)
            + (" (≥ 24: no progress)" if cr.saturated else ""),
            fmt(lm.lost_wall_minutes_per_day, 1, fixed=True),
            fmt(cr.lost_gpu_hours_per_year, 0, fixed=True),
            fmt(lm.lost_gpu_hours_per_year, 0, fixed=True),
            fmt(r.saved_gpu_hours_per_year, 0, fixed=True),
            fmt(r.saved_cost_per_year, 0, fixed=True),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    s = rows[0].scenario
    note = (
        f"\nAssumptions: MTTF {s.mttf_source}, checkpoint every "
        f"{fmt(s.checkpoint_interval_hours, 2)} h, restart {fmt(s.restart_minutes, 1)} min, "
        f"live recovery {fmt(s.live_downtime_seconds, 0)} s, "
        f"{fmt(s.gpu_hour_price, 4)} {currency}/GPU-hour, 365 days/year; each failure costs "
        "checkpoint-restart half an interval plus a restart, live migration its downtime.\n"
    )
    return header + "\n".join(lines) + "\n" + note


if __name__ == "__main__":  # a quick look at the published table
    print(compare(Scenario(gpus=1024, mttf_hours="7.9")).formula())
    print()
    print(format_table(scaling_table(gpu_hour_price=2, currency="USD")))
