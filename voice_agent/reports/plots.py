"""The report's figures as PNG bytes (matplotlib, Agg backend: no display needed).

- `waterfall`: one stacked bar per turn, the segments of `stats.critical_path` (end of
  speech to the first reply frame), with the turn budget as a line;
- `distributions`: each budgeted stage's durations per run, with its budget line;
- `concurrency`: voice to voice against the calls in progress when the turn began.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from voice_agent.reports import stats
from voice_agent.reports.runs import Run
from voice_agent.reports.stats import Segment
from voice_agent.turn_record import DegradeAction, Stage

WATERFALL = "waterfall.png"
DISTRIBUTIONS = "distributions.png"
CONCURRENCY = "concurrency.png"
MAX_WATERFALL_TURNS = 40
"""Longer runs show their slowest turns, in order."""
DPI = 100
SEGMENT_COLORS = {
    Segment.ENDPOINT: "#9e9e9e",
    Segment.ASR: "#1f77b4",
    Segment.PREP: "#bcbd22",
    Segment.ENGINE: "#2ca02c",
    Segment.TOOLS: "#9467bd",
    Segment.TTS: "#ff7f0e",
    Segment.SEND: "#8c564b",
}
BUDGET_STYLE: dict[str, Any] = {"color": "#d62728", "linestyle": "--", "linewidth": 1.2}


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend; ImportError names the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        # Labels are call ids and run names, never math: "$x^{2$" must not crash a report.
        matplotlib.rcParams["text.parse_math"] = False
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            f"reports need matplotlib: pip install 'voice-agent[reports]' ({exc})"
        ) from None
    return plt


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    _pyplot().close(fig)
    return buffer.getvalue()


def waterfall(runs: Sequence[Run]) -> bytes:
    plt = _pyplot()
    turns = [_waterfall_turns(run) for run in runs]
    heights = [max(2.0, 0.28 * len(t) + 1.2) for t in turns]
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})  # fmt: skip
    seen: set[Segment] = set()
    for ax, run, records in zip(axes[:, 0], runs, turns, strict=True):
        labels = []
        for y, record in enumerate(records):
            left = 0.0
            for segment, took in stats.critical_path(record):
                ax.barh(y, took, left=left, color=SEGMENT_COLORS[segment],
                        label=segment.value if segment not in seen else None)  # fmt: skip
                seen.add(segment)
                left += took
            filler = any(d.action is DegradeAction.PLAY_FILLER for d in record.degrades)
            labels.append(f"{record.call_id[-6:]} #{record.turn}{' filler' if filler else ''}")
        ax.set_yticks(range(len(records)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.axvline(run.records[0].budgets.turn_ms, **BUDGET_STYLE, label=None)
        cut = len(records) < len(run.records)
        shown = f" (slowest {len(records)} of {len(run.records)})" if cut else ""
        ax.set_title(f"{run.label}: end of caller speech → first reply frame{shown}", fontsize=10)
        ax.set_xlabel("ms")
    handles, names = axes[0, 0].get_legend_handles_labels()
    for ax in axes[1:, 0]:
        h, n = ax.get_legend_handles_labels()
        handles, names = handles + h, names + n
    handles.append(plt.Line2D([], [], **BUDGET_STYLE))
    names.append("turn budget")
    axes[0, 0].legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return _png(fig)


def _waterfall_turns(run: Run) -> list[Any]:
    timed = [r for r in run.records if r.first_audio_sent_at_ms is not None]
    if len(timed) <= MAX_WATERFALL_TURNS:
        return timed
    keep = {id(r) for r in stats.worst_turns(timed, MAX_WATERFALL_TURNS)}
    return [r for r in timed if id(r) in keep]


def distributions(runs: Sequence[Run]) -> bytes:
    plt = _pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(12, 7))
    panels = list(axes.flat)
    for ax, stage in zip(panels, stats.BUDGETED, strict=False):
        budget = runs[0].records[0].budgets.for_stage(stage)
        per_run = [stats.durations(run.records, stage) for run in runs]
        top = max([budget or 0.0, *(max(v) for v in per_run if v)]) * 1.05
        n = max(len(v) for v in per_run)
        edges = np.linspace(0.0, top or 1.0, min(40, max(10, n)) + 1)
        for run, values in zip(runs, per_run, strict=True):
            if values:
                ax.hist(values, bins=edges, histtype="stepfilled", alpha=0.45, label=run.label)
        if budget is not None:
            ax.axvline(budget, **BUDGET_STYLE, label=f"budget {budget} ms")
        title = "voice to voice" if stage is Stage.TURN else stage.value
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("ms")
        ax.legend(fontsize=7)
    _ecdf(panels[-1], runs)
    fig.suptitle("Latency distributions against budgets", fontsize=12)
    fig.tight_layout()
    return _png(fig)


def _ecdf(ax: Any, runs: Sequence[Run]) -> None:
    """Voice to voice as a cumulative share of turns, with p95 and the budget."""
    for run in runs:
        values = sorted(stats.durations(run.records, Stage.TURN))
        if values:
            shares = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, shares, where="post", label=run.label)
    ax.axvline(runs[0].records[0].budgets.turn_ms, **BUDGET_STYLE, label="turn budget")
    ax.axhline(0.95, color="#555555", linestyle=":", linewidth=1, label="95% of turns")
    ax.set_title("voice to voice, cumulative", fontsize=10)
    ax.set_xlabel("ms")
    ax.set_ylabel("share of turns")
    ax.legend(fontsize=7)


def concurrency(runs: Sequence[Run]) -> bytes:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for k, run in enumerate(runs):
        xs, ys = [], []
        for r in run.records:
            took = r.duration_ms(Stage.TURN)
            if r.concurrent_calls is not None and took is not None:
                xs.append(r.concurrent_calls + 0.08 * (k - (len(runs) - 1) / 2))
                ys.append(took)
        points = ax.scatter(xs, ys, s=18, alpha=0.6, label=run.label)
        levels = stats.by_concurrency(run.records)
        if levels:
            color = points.get_facecolor()[0]
            medians = [s.p50 for s in levels.values()]
            ax.plot(list(levels), medians, marker="o", color=color, label=f"{run.label} median")
    ax.axhline(runs[0].records[0].budgets.turn_ms, **BUDGET_STYLE, label="turn budget")
    ax.set_xlabel("calls in progress when the turn began")
    ax.set_ylabel("voice to voice, ms")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title("Latency against concurrent calls", fontsize=11)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


FIGURES = (
    (WATERFALL, waterfall, "Each turn as stacked segments from the end of the caller's "
     "speech to the first reply frame (dashed: the turn budget; 'filler': the first frame "
     "was the filler phrase, played while the reply was late)."),
    (DISTRIBUTIONS, distributions, "Per-stage latency distributions (dashed: each budget)."),
    (CONCURRENCY, concurrency, "Voice to voice against the calls in progress (dashed: budget)."),
)  # fmt: skip
"""(file name, function, caption) of each figure, in report order."""
