"""Thresholds come from the [health] table of a TOML file; a fault file raises the alarm that
starts a pre-emptive migration, once per category (the health path a worker runs)."""

import json
from dataclasses import asdict

import pytest

from agent.policy import load_thresholds
from agent.telemetry import HealthMonitor

pytestmark = pytest.mark.agent


def _monitor(tmp_path, toml: str | None):
    config = None
    if toml is not None:
        config = tmp_path / "agent.toml"
        config.write_text(toml)
    alarms: list[dict] = []
    settings = {"thresholds": asdict(load_thresholds(config)),
                "fault_file": str(tmp_path / "faults.json")}  # fmt: skip
    return HealthMonitor.from_config(settings, alarms.append), alarms, tmp_path / "faults.json"


def test_defaults_alarm_on_a_hot_gpu_once(tmp_path):
    monitor, alarms, faults = _monitor(tmp_path, None)
    monitor.check()
    assert alarms == []
    faults.write_text(json.dumps({"temperature_c": 97}))
    monitor.check()
    monitor.check()
    assert [a["category"] for a in alarms] == ["gpu_thermal"]
    assert not alarms[0]["fatal"]


def test_config_file_raises_the_threshold(tmp_path):
    monitor, alarms, faults = _monitor(tmp_path, "[health]\ntemperature_c = 100.0\n")
    faults.write_text(json.dumps({"temperature_c": 97}))
    monitor.check()
    assert alarms == []
    faults.write_text(json.dumps({"fault": "ecc"}))
    monitor.check()
    assert [a["category"] for a in alarms] == ["gpu_ecc"]


def test_unknown_setting_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="temprature_c"):
        _monitor(tmp_path, "[health]\ntemprature_c = 80\n")
