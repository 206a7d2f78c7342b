"""The default thresholds do not fire on a healthy machine that is merely busy: little host
memory available, a hot but in-spec GPU, power-capped clocks. Each alarm still fires on what it
is for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.policy import Thresholds, evaluate

BUSY = {
    "host_memory_available_mb": 90,  # the reading that ended a healthy job before
    "temperature_c": 84,
    "thermal_throttle": False,  # power capping is not a thermal reason
    "ecc_correctable": 40,
    "ecc_uncorrectable": 0,
    "row_remap_pending": False,
    "pcie_replay": 300,
    "recovery_action": 0,
}


@given(
    memory=st.integers(0, 1 << 20),
    temperature=st.floats(20, 89.9),
    ecc_rise=st.integers(0, 99),
    replays=st.integers(0, 999),
)
def test_defaults_stay_quiet_on_a_busy_healthy_machine(memory, temperature, ecc_rise, replays):
    readings = dict(BUSY, host_memory_available_mb=memory, temperature_c=temperature)
    readings.update(ecc_correctable=40 + ecc_rise, pcie_replay=300 + replays)
    assert evaluate(readings, BUSY, Thresholds()) == []


def test_each_default_alarm_still_fires_on_what_it_is_for():
    limits = Thresholds()
    for reading in (
        {"temperature_c": 95},
        {"thermal_throttle": True},
        {"ecc_correctable": 40 + 100},
        {"ecc_uncorrectable": 1},
        {"row_remap_pending": True},
        {"pcie_replay": 300 + 1000},
        {"recovery_action": 2},
        {"xid": 63},
    ):
        assert len(evaluate(dict(BUSY, **reading), BUSY, limits)) == 1, reading


def test_host_memory_alarm_is_there_when_asked_for():
    limits = Thresholds(host_memory_available_mb=512)
    (alarm,) = evaluate({"host_memory_available_mb": 100}, {}, limits)
    assert alarm.category == "host_memory" and not alarm.fatal
