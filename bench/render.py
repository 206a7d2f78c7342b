"""Regenerate docs/benchmarks.md from bench/results/*.json and the savings model.

    .venv/bin/python bench/render.py            # writes docs/benchmarks.md
    .venv/bin/python bench/render.py --check    # exit 1 if docs/benchmarks.md is stale

Deterministic: the same JSON files give the same page byte for byte (tests/lib/
test_benchmarks_render.py checks that the committed page matches the committed results).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import is_spread  # noqa: E402
from bench.savings_model import Scenario, compare, format_table, scaling_table  # noqa: E402

RESULTS = REPO / "bench" / "results"
DOC = REPO / "docs" / "benchmarks.md"
ORDER = ["goodput", "agent", "agent_modes", "sharded", "ingest", "portal"]
TITLES = {
    "goodput": "Goodput under failures: YOCO vs checkpoint-restart vs TorchFT (`bench/goodput.py`)",
    "agent": "Agent: transfer speed, step overhead, recovery time (`bench/agent.py`)",
    "agent_modes": "Agent: model-aware vs model-transparent mode",
    "sharded": "Agent: sharded jobs (FSDP2, HSDP): the shard mirror's cost, a kill's stall "
    "(`bench/sharded.py`)",
    "ingest": "Event ingest (`bench/ingest.py`)",
    "portal": "Portal page times (`bench/portal.py`)",
}
META = {"machine", "measured_at", "git_commit", "targets", "setup", "reproduced"}
SYSTEM_NAMES = {
    "yoco": "YOCO live migration",
    "checkpoint_restart": "checkpoint-restart (DCP + torchrun)",
    "torchft": "TorchFT",
    "torchrun": "plain torchrun, no failures (reference)",
}


def _v(value) -> str:
    if value is None:
        return "—"
    if is_spread(value):  # repeated measurements: median [min–max]
        if value["median"] is None:
            return "—"
        return f"{_v(value['median'])} [{_v(value['min'])}–{_v(value['max'])}]"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, (dict, list)):
        return "`" + json.dumps(value, ensure_ascii=False, sort_keys=True) + "`"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _met(flag) -> str:
    return {True: "**met**", False: "**missed**", None: "not measured"}[flag]


def _machine(doc: dict) -> str:
    m = doc.get("machine") or {}
    parts = [f"{k}: {_v(m[k])}" for k in sorted(m) if m[k] is not None]
    line = "Machine: " + (", ".join(parts) if parts else "not recorded")
    extra = [f"measured {doc['measured_at']}" if doc.get("measured_at") else ""]
    extra.append(f"commit {doc['git_commit']}" if doc.get("git_commit") else "")
    extra = [e for e in extra if e]
    return line + (f" ({'; '.join(extra)})" if extra else "") + "."


def _flatten(doc: dict, prefix: str = "", depth: int = 0) -> list[tuple[str, object]]:
    rows = []
    for key in doc:
        if not prefix and key in META:
            continue
        value, name = doc[key], f"{prefix}{key}"
        if isinstance(value, dict) and depth < 1 and value and not is_spread(value):
            rows += _flatten(value, f"{name}.", depth + 1)
        else:
            rows.append((name, value))
    return rows


# ------------------------------------------------------------------ targets of the other benches


def _generic_targets(name: str, doc: dict) -> list[tuple[str, object, str, bool | None]]:
    """(figure, value, target, met) where the result names a target."""
    out = []
    targets = doc.get("targets")
    if name == "ingest" and isinstance(targets, dict):
        rate = (doc.get("events_per_s") or {}).get("1000")
        if "events_per_s_1000" in targets:
            goal = targets["events_per_s_1000"]
            out.append(("events/s, batches of 1,000", rate, f"≥ {_v(goal)}", _ge(rate, goal)))
        if "recompute_100k_s" in targets:
            goal = targets["recompute_100k_s"]
            value = doc.get("recompute_100k_s")
            out.append(("recompute 100k incidents (s)", value, f"≤ {_v(goal)}", _le(value, goal)))
    elif name == "portal" and "target_p95_ms" in doc:
        goal = doc["target_p95_ms"]
        for key in ("dashboard_p95_ms", "incidents_p95_ms"):
            if key in doc:
                out.append((key, doc[key], f"≤ {_v(goal)}", _le(doc[key], goal)))
    elif isinstance(targets, dict):
        for key, spec in targets.items():
            if isinstance(spec, dict) and "met" in spec:
                out.append((key, spec.get("value"), str(spec.get("target", "")), spec["met"]))
    return out


def _ge(value, goal):
    return None if value is None else value >= goal


def _le(value, goal):
    return None if value is None else value <= goal


def _recovery_by_step(doc: dict) -> list[str]:
    """Modes side by side: recovery (s) by kill step, median (min-max) (bench/agent_modes.py)."""
    modes = [m for m in doc if isinstance(doc[m], dict) and "recovery_s_by_step" in doc[m]]
    if not modes:
        return []
    steps = [k for k in doc[modes[0]]["recovery_s_by_step"] if "_" not in k]
    lines = ["| kill → next completed step (s) | " + " | ".join(modes) + " |"]
    lines.append("|---|" + "---:|" * len(modes))
    for step in steps:
        cells = []
        for mode in modes:
            by = doc[mode]["recovery_s_by_step"]
            low, high = _v(by.get(f"{step}_min")), _v(by.get(f"{step}_max"))
            cells.append(f"{_v(by.get(step))} ({low}–{high})")
        lines.append(f"| step {step}, median (min–max) | " + " | ".join(cells) + " |")
    return lines + [""]


def _render_generic(name: str, doc: dict) -> list[str]:
    lines = []
    if doc.get("setup"):
        lines += [f"Setup: {_v(doc['setup'])}.", ""]
    lines += _recovery_by_step(doc)
    targets = _generic_targets(name, doc)
    if targets:
        lines += ["| target | figure | target | result |", "|---|---:|---:|---|"]
        for label, value, goal, met in targets:
            lines.append(f"| {label} | {_v(value)} | {goal} | {_met(met)} |")
        lines.append("")
    lines += ["| figure | value |", "|---|---|"]
    for key, value in _flatten(doc):
        lines.append(f"| {key} | {_v(value)} |")
    return lines


# ------------------------------------------------------------------ goodput


def _render_goodput(doc: dict) -> list[str]:
    cfg, ck = doc.get("config", {}), doc.get("checkpoint", {})
    lines = [
        f"The same job ({cfg.get('workers', '?')} workers, agent/examples/gpt.py's model "
        f"`{cfg.get('model', '')}`, {_v(cfg.get('steps'))} steps, seed {cfg.get('seed', 0)}) "
        f"with {doc.get('failures')} SIGKILLs of a worker process, about one every "
        f"{_v(cfg.get('kill_every_steps'))} steps (seeded (step, rank): "
        f"{_v([[s.get('step'), s.get('rank')] for s in cfg.get('schedule', [])])}). Every "
        f"figure is the median [min–max] of {_v(doc.get('repeats'))} runs of each "
        "configuration, interleaved round-robin so that changes in machine load hit every "
        "system alike.",
        "",
    ]
    if ck:
        lines += [
            f"Checkpoint-restart: a DCP checkpoint costs {_v(ck.get('cost_s'))} s, a step "
            f"{_v(ck.get('step_s'))} s; with the schedule's MTTF of {_v(ck.get('mttf_s'))} s "
            f"Young/Daly gives {_v(ck.get('young_daly_interval_s'))} s = every "
            f"{_v(ck.get('interval_steps'))} steps ({_v(ck.get('intervals_per_failure'))} "
            "checkpoint intervals per failure).",
            "",
        ]
    columns = [
        ("wall with failures (s)", "wall_s"),
        ("tokens/s with failures", "tokens_per_s"),
        ("failure-free wall (s)", "failure_free_wall_s"),
        ("failure-free tokens/s", "failure_free_tokens_per_s"),
        ("time to first step (s)", "time_to_first_step_s"),
        ("time lost per failure (s)", "time_lost_per_failure_s"),
        ("… vs plain torchrun (s)", "time_lost_per_failure_vs_torchrun_s"),
        ("steps recomputed", "steps_recomputed"),
        ("ETTR", "ettr"),
        ("kills landed", "failures_injected"),
    ]
    lines += [
        "| system | " + " | ".join(title for title, _ in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for key, figures in doc.get("systems", {}).items():
        cells = [_v(figures.get(field)) for _, field in columns]
        lines.append(f"| {SYSTEM_NAMES.get(key, key)} | " + " | ".join(cells) + " |")
    lines.append("")
    targets = doc.get("targets", {})
    if targets:
        lines += [
            "| target (on medians) | measured | target | result |",
            "|---|---:|---:|---|",
        ]
        for key, spec in targets.items():
            lines.append(
                f"| {key} | {_v(spec.get('value'))} | {spec.get('target', '')} "
                f"| {_met(spec.get('met'))} |"
            )
        lines.append("")
    lines += [
        "How each system runs (`bench/goodput.py`; each also runs once per round without "
        "failures, its own baseline; every training script publishes its progress the same "
        "way, read every 20 ms):",
        "",
        "* **YOCO**: `bench/yoco_train.py` (the model-aware job) under `yoco-agent run "
        "--workers 2 --spares F` (one standby spare per failure: spares are not replenished "
        "within a run). The spares start once the workers train, one at a time, at a lower CPU "
        "priority; a failure that finds no spare ready waits for the one starting. The spare "
        "takes the rank over from a live replica, no rollback.",
        "* **checkpoint-restart**: `bench/ckpt_restart_train.py` (plain DDP over gloo, the same "
        "model, optimizer, schedule, data and seed) under `torchrun --max-restarts`; a "
        "`torch.distributed.checkpoint` every C steps, C from the Young/Daly rule "
        "(√(2 × checkpoint cost × MTTF)) with the cost measured in a 60-step calibration run; "
        "each failure restarts every worker from the newest checkpoint.",
        "* **TorchFT**: `bench/torchft_train.py` (torchft-nightly's Manager, DDP and Optimizer "
        "wrappers; the lighthouse on 127.0.0.1 with a 1 s heartbeat timeout, like YOCO's), one "
        "replica group of one process per worker, each under its own `torchrun "
        "--max-restarts`. A dead group is dropped from the quorum, the survivor goes on "
        "short-handed and the restarted group fetches the state from it; the job ends when "
        "steps × groups batches are committed, so short-handed steps are made up. Installed "
        'by the project\'s `[bench]` extra (`pip install -e ".[bench]"`, or '
        "`YOCO_BENCH=1 bash .ci/setup`); the benchmark refuses to run without it.",
        "* **plain torchrun**: `bench/ckpt_restart_train.py` without checkpoints and without "
        "failures: the job with no fault tolerance at all, the reference for time to first "
        "step and for wall time.",
        "* Time lost per failure is measured against the system's own failure-free run of the "
        "same round (the cost of the failures alone) and against plain torchrun's (what a "
        "buyer compares: start-up, spares and coordinator included). At this job size start-up "
        "(process launch, imports, rendezvous) is a large share of every wall time, which is "
        "why every ETTR here is far below 1. A kill whose target is down (TorchFT: a group "
        "still restarting) waits for it to be back, so the actual kill steps (`kills` in the "
        "JSON) can differ between systems.",
        "",
    ]
    for key, text in doc.get("definitions", {}).items():
        lines.append(f"* `{key}`: {text}.")
    return lines


# ------------------------------------------------------------------ two consecutive runs


def _render_reproduced(doc: dict) -> list[str]:
    """The check of bench/reproduce.py: this run's ranges against the run made just before."""
    block = doc.get("reproduced")
    if not block:
        return []
    before = block.get("previous_run", {})
    verdict = (
        "every range overlaps" if block.get("all_overlap") else "**some ranges do not overlap**"
    )
    lines = [
        f"Reproduced: the run before this one (commit {before.get('git_commit')}, measured "
        f"{before.get('measured_at')}) against this one, min–max of each headline figure "
        f"(`bench/reproduce.py`): {verdict}.",
        "",
        "| figure | run before | this run | overlap |",
        "|---|---:|---:|---|",
    ]
    for figure, spec in block.get("figures", {}).items():
        cells = [_range(spec.get("previous")), _range(spec.get("latest"))]
        lines.append(f"| {figure} | " + " | ".join(cells) + f" | {_v(spec.get('overlap'))} |")
    return lines + [""]


def _range(pair) -> str:
    return _v(None) if not pair else f"{_v(pair[0])}–{_v(pair[1])}"


# ------------------------------------------------------------------ savings


def _render_savings() -> list[str]:
    published = compare(Scenario(gpus=1024, mttf_hours="7.9"))
    large = compare(Scenario(gpus=16384, mttf_hours="1.8"))
    return [
        "## The savings model (`yoco/lib/savings.py`, `bench/savings_model.py`)",
        "",
        "The published claim, reproduced: " + published.formula() + ".",
        "",
        "At the published 16,384-GPU MTTF of 1.8 h: " + large.formula() + ". The table below "
        "instead scales the 1,024-GPU failure rate per GPU (so its MTTF at 16,384 GPUs is "
        "0.49 h, not the published 1.8 h).",
        "",
        format_table(scaling_table(gpu_hour_price=2, currency="USD")).rstrip("\n"),
    ]


def render(results: Path = RESULTS) -> str:
    docs = {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}
    names = [n for n in ORDER if n in docs] + sorted(n for n in docs if n not in ORDER)
    out = [
        "# Benchmarks",
        "",
        "<!-- GENERATED by bench/render.py from bench/results/*.json — do not edit by hand; "
        "run `.venv/bin/python bench/render.py` -->",
        "",
        "Each section comes from one results file, with the machine and the commit that "
        "produced it. A figure written `median [min–max]` is the spread of repeated runs; "
        "targets are judged on the medians and shown beside the figures as met or missed. "
        "Figures measured on a shared 2-core CPU machine are noisy.",
        "",
    ]
    for name in names:
        doc = docs[name]
        out += [
            f"## {TITLES.get(name, name)}",
            "",
            f"`bench/results/{name}.json`. " + _machine(doc),
            "",
        ]
        out += _render_goodput(doc) if name == "goodput" else _render_generic(name, doc)
        out.append("")
        out += _render_reproduced(doc)
    out += _render_savings()
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    text = render()
    if args.check:
        if not DOC.exists() or DOC.read_text() != text:
            print("docs/benchmarks.md is stale: run .venv/bin/python bench/render.py")
            sys.exit(1)
        return
    DOC.write_text(text)
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
