"""Does a benchmark reproduce? Compare two consecutive runs' headline figures.

    .venv/bin/python bench/reproduce.py goodput PREVIOUS.json   # adds "reproduced" to
                                                                # bench/results/goodput.json

One run on a shared machine is not a measurement: a benchmark's result is trusted when a second
run, made right after the first, gives min–max ranges that overlap the first's on every headline
figure. This adds to bench/results/NAME.json (the later run) a ``reproduced`` block: the
earlier run's commit and time, and per headline figure both ranges and whether they overlap.
docs/benchmarks.md (bench/render.py) shows it. Exit status 1 when some range does not overlap.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import RESULTS, is_spread, overlaps  # noqa: E402

GOODPUT_HEADLINES = (
    "wall_s",
    "tokens_per_s",
    "failure_free_wall_s",
    "time_to_first_step_s",
    "time_lost_per_failure_s",
)
AGENT_HEADLINES = ("migration_gbps", "overhead_ratio", "recovery_s")


def headlines(name: str, doc: dict) -> dict[str, dict]:
    """figure name -> spread, for the figures a reader of NAME's results judges it by."""
    out = {}
    if name == "goodput":
        for system, figures in doc.get("systems", {}).items():
            for figure in GOODPUT_HEADLINES:
                if is_spread(figures.get(figure)):
                    out[f"{system}.{figure}"] = figures[figure]
    elif name == "agent":
        for figure in AGENT_HEADLINES:
            value = doc.get(figure)
            if is_spread(value):
                out[figure] = value
            elif isinstance(value, dict):  # per state size
                out |= {f"{figure}.{k}": v for k, v in value.items() if is_spread(v)}
    else:
        raise ValueError(f"no headline figures are defined for {name!r}")
    return out


def compare(name: str, previous: dict, latest: dict) -> dict:
    """The ``reproduced`` block: each headline figure's two ranges and whether they overlap.
    A figure only one run has is listed with ``overlap: null`` and fails the check."""
    before, after = headlines(name, previous), headlines(name, latest)
    figures = {}
    for figure in sorted(before.keys() | after.keys()):
        a, b = before.get(figure), after.get(figure)
        figures[figure] = {
            "previous": [a["min"], a["max"]] if a else None,
            "latest": [b["min"], b["max"]] if b else None,
            "overlap": overlaps(a, b) if a and b else None,
        }
    return {
        "previous_run": {
            "git_commit": previous.get("git_commit"),
            "measured_at": previous.get("measured_at"),
        },
        "all_overlap": bool(figures) and all(f["overlap"] for f in figures.values()),
        "figures": figures,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("name", choices=("goodput", "agent"))
    p.add_argument("previous", type=Path, help="the earlier run's result file")
    p.add_argument("--latest", type=Path, help="default bench/results/NAME.json")
    args = p.parse_args()
    latest_path = args.latest or RESULTS / f"{args.name}.json"
    latest = json.loads(latest_path.read_text())
    latest["reproduced"] = compare(args.name, json.loads(args.previous.read_text()), latest)
    latest_path.write_text(json.dumps(latest, indent=2) + "\n")
    for figure, spec in latest["reproduced"]["figures"].items():
        print(f"{figure:45} {spec['previous']} {spec['latest']} overlap={spec['overlap']}")
    sys.exit(0 if latest["reproduced"]["all_overlap"] else 1)


if __name__ == "__main__":
    main()
