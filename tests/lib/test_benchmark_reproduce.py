"""bench/reproduce.py: two consecutive runs of a benchmark agree when every headline figure's
min–max ranges overlap; a figure only one run has, or ranges apart, fail the check."""

from bench.render import render
from bench.reproduce import compare


def _spread(low, high):
    return {"median": (low + high) / 2, "min": low, "max": high, "n": 5}


def _goodput(wall, first_step):
    return {
        "git_commit": "abc1234",
        "measured_at": "2026-12-03T12:00:00+00:00",
        "systems": {
            "yoco": {"wall_s": _spread(*wall), "time_to_first_step_s": _spread(*first_step),
                     "step_s": _spread(0.0, 9.0)},  # not a headline figure
        },
    }  # fmt: skip


def test_overlapping_ranges_reproduce():
    block = compare("goodput", _goodput((10, 12), (2, 3)), _goodput((11.5, 13), (3, 4)))
    assert block["all_overlap"] is True
    assert block["previous_run"] == {"git_commit": "abc1234",
                                     "measured_at": "2026-12-03T12:00:00+00:00"}  # fmt: skip
    assert block["figures"] == {
        "yoco.time_to_first_step_s": {"previous": [2, 3], "latest": [3, 4], "overlap": True},
        "yoco.wall_s": {"previous": [10, 12], "latest": [11.5, 13], "overlap": True},
    }


def test_ranges_apart_or_a_figure_missing_do_not_reproduce():
    apart = compare("goodput", _goodput((10, 12), (2, 3)), _goodput((12.1, 13), (2, 3)))
    assert apart["all_overlap"] is False
    assert apart["figures"]["yoco.wall_s"]["overlap"] is False
    latest = _goodput((10, 12), (2, 3))
    del latest["systems"]["yoco"]["wall_s"]
    missing = compare("goodput", _goodput((10, 12), (2, 3)), latest)
    assert missing["figures"]["yoco.wall_s"] == {"previous": [10, 12], "latest": None,
                                                 "overlap": None}  # fmt: skip
    assert missing["all_overlap"] is False


def test_agent_headlines_include_each_state_size():
    doc = {"overhead_ratio": _spread(0.9, 1.0), "recovery_s": {"100MB": _spread(1, 2)},
           "memcpy_gbps": _spread(1, 2)}  # fmt: skip
    block = compare("agent", doc, doc)
    assert set(block["figures"]) == {"overhead_ratio", "recovery_s.100MB"}
    assert block["all_overlap"] is True


def test_the_check_is_shown_in_docs_benchmarks(tmp_path):
    import json

    doc = _goodput((10, 12), (2, 3))
    doc["reproduced"] = compare("goodput", _goodput((10, 11), (2, 3)), doc)
    (tmp_path / "goodput.json").write_text(json.dumps(doc))
    page = render(tmp_path)
    assert "Reproduced: the run before this one (commit abc1234" in page
    assert "| yoco.wall_s | 10–11 | 10–12 | yes |" in page
