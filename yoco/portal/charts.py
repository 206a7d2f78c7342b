"""The dashboard's plotly figures, built on the server and rendered by the static plotly.js.

Figures are plain plotly figure dicts serialised with `plotly.io.to_json` (validation off: the
figures are fixed and validating them costs more server time than computing the data).
"""

from decimal import Decimal

import plotly.io as pio

from yoco.lib.vocabulary import OUTCOMES
from yoco.portal.stats import DOWNTIME_LABELS, YearStats

COLORS = {
    "live_resolved": "#15803d",
    "rolled_back": "#d97706",
    "failed": "#dc2626",
    "pending": "#64748b",
    "excluded": "#a8a29e",
    "planned": "#2563eb",
}
LABELS = {
    "live_resolved": "Live-resolved",
    "rolled_back": "Rolled back",
    "failed": "Failed",
    "pending": "Pending",
    "excluded": "Excluded",
    "planned": "Planned",
}
TRIGGER_COLORS = {"unplanned": "#dc2626", "preemptive": "#7c3aed", "planned": "#2563eb"}
FONT = "Inter, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


def _layout(**extra) -> dict:
    layout = {
        "font": {"family": FONT, "size": 12, "color": "#334155"},
        "margin": {"l": 48, "r": 16, "t": 36, "b": 40},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "height": 300,
        "legend": {
            "orientation": "h",
            "y": 1.02,
            "yanchor": "bottom",
            "x": 0,
            "font": {"size": 11},
        },
        "hoverlabel": {"font": {"family": FONT}},
        "xaxis": {"gridcolor": "#eef2f7", "linecolor": "#cbd5e1", "fixedrange": True},
        "yaxis": {"gridcolor": "#eef2f7", "zerolinecolor": "#cbd5e1", "fixedrange": True},
    }
    layout.update(extra)
    return layout


def to_json(figure: dict) -> str:
    # Safe inside <script type="application/json">: no "</script>" can close it early.
    return pio.to_json(figure, validate=False, remove_uids=False).replace("<", "\\u003c")


def outcomes_per_month(stats: YearStats) -> str:
    x = [m.strftime("%b %Y") for m in stats.months]
    data = [
        {
            "type": "bar",
            "name": LABELS[o],
            "x": x,
            "y": stats.outcomes_by_month[o],
            "marker": {"color": COLORS[o]},
            "hovertemplate": "%{x}: %{y:,} " + LABELS[o].lower() + "<extra></extra>",
        }
        for o in OUTCOMES
        if any(stats.outcomes_by_month[o])
    ]
    return to_json({"data": data, "layout": _layout(barmode="stack", bargap=0.25)})


def recovery_time(stats: YearStats, deadline_minutes: int) -> str:
    data = [
        {
            "type": "bar",
            "name": LABELS[o],
            "x": list(DOWNTIME_LABELS),
            "y": stats.downtime[o],
            "marker": {"color": COLORS[o]},
            "hovertemplate": "%{x}: %{y:,} incidents<extra>" + LABELS[o] + "</extra>",
        }
        for o in OUTCOMES
        if any(stats.downtime[o])
    ]
    layout = _layout(barmode="stack", bargap=0.08)
    layout["xaxis"] = {**layout["xaxis"], "title": {"text": "downtime until the job resumed"}}
    layout["margin"] = {**layout["margin"], "b": 64}
    return to_json({"data": data, "layout": layout})


def by_category(stats: YearStats) -> str:
    totals: dict[str, int] = {}
    for (category, _), n in stats.by_category.items():
        totals[category] = totals.get(category, 0) + n
    order = sorted(totals, key=lambda c: totals[c])
    data = []
    for trigger in ("unplanned", "preemptive", "planned"):
        counts = [stats.by_category.get((c, trigger), 0) for c in order]
        if any(counts):
            data.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "name": trigger.capitalize(),
                    "y": [c.replace("_", " ") for c in order],
                    "x": counts,
                    "marker": {"color": TRIGGER_COLORS[trigger]},
                    "hovertemplate": "%{y}: %{x:,} " + trigger + "<extra></extra>",
                }
            )
    layout = _layout(barmode="stack", height=max(300, 22 * len(order) + 80))
    layout["margin"] = {**layout["margin"], "l": 110}
    return to_json({"data": data, "layout": layout})


def by_trigger(stats: YearStats) -> str:
    triggers = [t for t in ("unplanned", "preemptive", "planned") if stats.by_trigger.get(t)]
    data = [
        {
            "type": "pie",
            "hole": 0.6,
            "labels": [t.capitalize() for t in triggers],
            "values": [stats.by_trigger[t] for t in triggers],
            "marker": {"colors": [TRIGGER_COLORS[t] for t in triggers]},
            "sort": False,
            "textinfo": "percent",
            "hovertemplate": "%{label}: %{value:,} incidents<extra></extra>",
        }
    ]
    layout = _layout(margin={"l": 8, "r": 8, "t": 8, "b": 8}, showlegend=True)
    layout["legend"] = {"orientation": "h", "y": -0.05, "x": 0.5, "xanchor": "center"}
    return to_json({"data": data, "layout": layout})


def progress_protected(stats: YearStats) -> str:
    x = [m.strftime("%b %Y") for m in stats.months]
    monthly = [float(v) for v in stats.protected_by_month]
    running, cumulative = Decimal(0), []
    for value in stats.protected_by_month:
        running += value
        cumulative.append(float(running))
    data = [
        {
            "type": "bar",
            "name": "GPU-hours protected in the month",
            "x": x,
            "y": monthly,
            "marker": {"color": "#0f766e"},
            "hovertemplate": "%{x}: %{y:,.0f} GPU-h<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Cumulative",
            "x": x,
            "y": cumulative,
            "yaxis": "y2",
            "line": {"color": "#0f172a", "width": 2},
            "marker": {"size": 5},
            "hovertemplate": "%{x}: %{y:,.0f} GPU-h so far<extra></extra>",
        },
    ]
    layout = _layout(bargap=0.3)
    layout["yaxis"] = {**layout["yaxis"], "title": {"text": "GPU-hours"}}
    layout["yaxis2"] = {
        "overlaying": "y",
        "side": "right",
        "showgrid": False,
        "fixedrange": True,
        "rangemode": "tozero",
    }
    layout["margin"] = {**layout["margin"], "r": 56}
    return to_json({"data": data, "layout": layout})
