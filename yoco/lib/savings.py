"""The savings model behind "progress protected" (SPEC 4.6): what a failure costs under
checkpoint-restart and under live migration.

Plain Python (standard library only: no Django, no torch). The portal uses
:func:`protected_gpu_hours`; the benchmarks' scenarios and tables (bench/savings_model.py) build
on the same per-failure loss and the same validation.

Arithmetic
    Every quantity is a :class:`decimal.Decimal`, computed in the default 28-digit context and
    never rounded inside the model (round only to display: :func:`fmt`). Inputs may be ``int``,
    ``Decimal``, a decimal string (``"1.5"``) or a ``float``; a float is read through ``str``
    so ``7.9`` means exactly ``Decimal("7.9")``. ``bool``, NaN and infinities are refused.
    Money (``gpu_hour_price`` and the costs derived from it) is unrounded too: round it to the
    currency's minor unit where it is shown.

Model (SPEC 4.6)
    Checkpoint-restart loses, per failure, on average half a checkpoint interval of completed
    work (the failure falls uniformly between two checkpoints) plus the restart time, on every
    GPU of the job (:func:`checkpoint_restart_loss_hours`); live migration loses its measured
    downtime, on every GPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

Number = int | float | str | Decimal

MINUTES_PER_HOUR = Decimal(60)
SECONDS_PER_HOUR = Decimal(3600)

# The contract defaults of SPEC 4.6 (`yoco.guarantee.rules` reads them from here).
DEFAULT_CHECKPOINT_INTERVAL_HOURS = Decimal("1.5")
DEFAULT_RESTART_MINUTES = Decimal(15)


# --------------------------------------------------------------------------- validation


def decimal_of(value: Number, name: str) -> Decimal:
    """``value`` as a finite Decimal, or ValueError naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ValueError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    try:
        result = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    except (InvalidOperation, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not result.is_finite():
        raise ValueError(f"{name} must be finite, got {value!r}")
    return result


def positive(value: Number, name: str) -> Decimal:
    result = decimal_of(value, name)
    if result <= 0:
        raise ValueError(f"{name} must be greater than 0, got {value!r}")
    return result


def non_negative(value: Number, name: str) -> Decimal:
    result = decimal_of(value, name)
    if result < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    return result


def whole_number(value: object, name: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        # Accept integral Decimals/floats/strings ("1024", 1024.0) but nothing fractional.
        try:
            as_dec = decimal_of(value, name)  # type: ignore[arg-type]
        except ValueError:
            raise ValueError(f"{name} must be a whole number, got {value!r}") from None
        if as_dec != as_dec.to_integral_value():
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        value = int(as_dec)
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return value


def checkpoint_restart_loss_hours(
    checkpoint_interval_hours: Number, restart_minutes: Number
) -> Decimal:
    """Wall hours one failure costs checkpoint-restart: half an interval plus the restart."""
    interval = positive(checkpoint_interval_hours, "checkpoint_interval_hours")
    restart = non_negative(restart_minutes, "restart_minutes")
    return interval / 2 + restart / MINUTES_PER_HOUR


# --------------------------------------------------------------------------- formatting


def fmt(value: Decimal, places: int = 2, *, fixed: bool = False) -> str:
    """``value`` rounded half-up to ``places`` decimals, with thousands separators. Trailing
    zeros are dropped (``1.50`` → ``1.5``, ``15.0`` → ``15``) unless ``fixed`` (money:
    ``3,712.00``)."""
    q = Decimal(1).scaleb(-places)
    rounded = Decimal(value).quantize(q, rounding=ROUND_HALF_UP)
    if not fixed and places:
        rounded = rounded.normalize()
        if rounded == rounded.to_integral_value():
            rounded = rounded.quantize(Decimal(1))
    return f"{rounded:,}"


# --------------------------------------------------------------------------- portal


@dataclass(frozen=True)
class LiveRecovery:
    """One live-resolved incident, as the portal sees it."""

    gpus: int
    downtime_seconds: Decimal


@dataclass(frozen=True)
class ProtectedProgress:
    """SPEC 4.6's "progress protected" over a set of live-resolved incidents.

    ``gpu_hours`` = Σ gpus × (interval ÷ 2 + restart − downtime). Not clamped: with a short
    interval and a long downtime an incident can protect negative progress, and that is shown.
    """

    gpu_hours: Decimal
    incidents: int  # counted
    skipped: int  # left out because their GPU count or downtime is unknown
    gpus_total: int  # Σ gpus over the counted incidents
    checkpoint_restart_gpu_hours: Decimal  # Σ gpus × (interval ÷ 2 + restart)
    live_gpu_hours: Decimal  # Σ gpus × downtime
    checkpoint_interval_hours: Decimal
    restart_minutes: Decimal
    checkpoint_restart_hours_per_failure: Decimal  # interval ÷ 2 + restart
    gpu_hour_price: Decimal | None
    value: Decimal | None  # gpu_hours × price, unrounded; None without a price
    formula: str


def _recovery(item: object) -> tuple[object, object]:
    if isinstance(item, LiveRecovery) or (
        hasattr(item, "gpus") and hasattr(item, "downtime_seconds")
    ):
        return item.gpus, item.downtime_seconds  # type: ignore[attr-defined]
    if isinstance(item, dict):
        return item.get("gpus"), item.get("downtime_seconds")
    try:
        gpus, downtime = item  # type: ignore[misc]
    except (TypeError, ValueError):
        raise ValueError(f"each incident must be (gpus, downtime_seconds), got {item!r}") from None
    return gpus, downtime


def protected_gpu_hours(
    incidents: Iterable[object],
    *,
    checkpoint_interval_hours: Number = DEFAULT_CHECKPOINT_INTERVAL_HOURS,
    restart_minutes: Number = DEFAULT_RESTART_MINUTES,
    gpu_hour_price: Number | None = None,
    currency: str = "",
) -> ProtectedProgress:
    """Progress protected by live recovery (SPEC 4.6).

    ``incidents`` are the live-resolved incidents, each a ``(gpus, downtime_seconds)`` pair, a
    :class:`LiveRecovery`, an object with those attributes or a dict with those keys. An
    incident whose GPU count or downtime is ``None`` (its job never reported them) is skipped
    and counted in ``skipped``; any other bad value raises ValueError.
    """
    interval = positive(checkpoint_interval_hours, "checkpoint_interval_hours")
    restart = non_negative(restart_minutes, "restart_minutes")
    price = None if gpu_hour_price is None else non_negative(gpu_hour_price, "gpu_hour_price")
    per_failure_h = checkpoint_restart_loss_hours(interval, restart)

    counted = skipped = gpus_total = 0
    live_gpu_h = Decimal(0)
    for index, item in enumerate(incidents):
        gpus, downtime = _recovery(item)
        if gpus is None or downtime is None:
            skipped += 1
            continue
        gpus = whole_number(gpus, f"incident {index}: gpus")
        downtime_s = non_negative(downtime, f"incident {index}: downtime_seconds")  # type: ignore[arg-type]
        counted += 1
        gpus_total += gpus
        live_gpu_h += gpus * downtime_s / SECONDS_PER_HOUR

    cr_gpu_h = gpus_total * per_failure_h
    saved = cr_gpu_h - live_gpu_h
    value = None if price is None else saved * price
    formula = (
        f"Σ GPUs × ({fmt(interval, 2)} h checkpoint interval ÷ 2 + {fmt(restart, 1)} min "
        f"restart − measured downtime) over {counted:,} live-resolved incident"
        f"{'' if counted == 1 else 's'} = {gpus_total:,} GPUs × {fmt(per_failure_h, 4)} h − "
        f"{fmt(live_gpu_h, 1)} GPU-h of downtime = {fmt(saved, 1)} GPU-hours"
    )
    if value is not None:
        unit = f" {currency}" if currency else ""
        formula += f" × {fmt(price, 4)}{unit}/GPU-hour = {fmt(value, 2, fixed=True)}{unit}"
    if skipped:
        plural = "" if skipped == 1 else "s"
        formula += f" ({skipped:,} incident{plural} without a GPU count or downtime left out)"
    return ProtectedProgress(
        gpu_hours=saved,
        incidents=counted,
        skipped=skipped,
        gpus_total=gpus_total,
        checkpoint_restart_gpu_hours=cr_gpu_h,
        live_gpu_hours=live_gpu_h,
        checkpoint_interval_hours=interval,
        restart_minutes=restart,
        checkpoint_restart_hours_per_failure=per_failure_h,
        gpu_hour_price=price,
        value=value,
        formula=formula,
    )
