"""Draw plans for an operator: GPUs as rows, time as columns, one labelled box per job.

Several plans of one scenario stack top to bottom (the plan above fifo). What the picture
must let an operator read without a legend hunt:

- the x axis is clock time when the plan knows its start (plan-day), else hours from now;
- node boundaries are drawn as heavy lines, so a job straddling nodes is visible;
- each batch job is one box (its block is contiguous and unbroken) carrying its id when
  the box can hold it, else a number listed in the legend below;
- each kind has its own colour family (training blues, quantization greens, batch
  inference purples), shades within a family tell jobs of that kind apart;
- realtime is red, cross-hatched and outlined, one label per service.
"""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import Patch, Rectangle

FAMILIES = {
    "training": "Blues",
    "quantization": "Greens",
    "batch_inference": "Purples",
    "realtime": "Reds",
}
KIND_LABELS = {"training": "training", "quantization": "quantization",
               "batch_inference": "batch inference", "realtime": "realtime"}
FIG_WIDTH_IN = 13.0
DPI = 110
CHAR_W_IN = 0.064  # one character of the 7 pt label font, in inches (a safe overestimate)
ROW_H_IN = 0.22  # one GPU row
MAX_PANEL_IN = 14.0
MAX_LEGEND = 60
RGBA = tuple[float, float, float, float]  # a colour as matplotlib's colour maps return it
HATCHES = ("xxx", "///", "\\\\\\", "++", "..", "oo")  # one per realtime service


def _colours(ids: list[str], kinds: dict[str, str]) -> dict[str, RGBA]:
    """Shades of each kind's colour family, spread so neighbours in id order differ."""
    by_kind: dict[str, list[str]] = {}
    for job in ids:
        by_kind.setdefault(kinds.get(job, "training"), []).append(job)
    out: dict[str, RGBA] = {}
    for kind, jobs in by_kind.items():
        cmap = plt.get_cmap(FAMILIES.get(kind, "Greys"))
        n = len(jobs)
        for i, job in enumerate(jobs):
            # 0.35 .. 0.85 of the map: light enough for black text, never white
            spread = (i * 0.618) % 1.0 if n > 3 else (i + 0.5) / max(n, 1)
            out[job] = cmap(0.35 + 0.5 * spread)
    return out


def _runs(grid: list[list[str | None]], job: str, g: int) -> list[tuple[int, int]]:
    """Maximal [start, end) step runs where GPU g holds `job`."""
    out, start = [], None
    for t, row in enumerate(grid):
        if row[g] == job and start is None:
            start = t
        elif row[g] != job and start is not None:
            out.append((start, t))
            start = None
    if start is not None:
        out.append((start, len(grid)))
    return out


def _clock(plans: list[dict[str, Any]]) -> tuple[datetime | None, int]:
    first = plans[0] if plans else {}
    minutes = int(first.get("step_minutes") or 60)
    start = first.get("start")
    if isinstance(start, str):
        try:
            return datetime.fromisoformat(start.replace("Z", "+00:00")), minutes
        except ValueError:
            return None, minutes
    return None, minutes


def _ticks(ax: Axes, T: int, start: datetime | None, minutes: int) -> None:
    every = max(1, round(T / 12))
    ticks = list(range(0, T + 1, every))
    ax.set_xticks(ticks)
    if start is None:
        ax.set_xticklabels([f"+{t * minutes / 60:g}h" for t in ticks], fontsize=8)
        ax.set_xlabel(f"time from the plan's start (steps of {minutes} min)", fontsize=9)
        return
    labels = []
    for t in ticks:
        when = start + timedelta(minutes=minutes * t)
        day = t == 0 or (when - timedelta(minutes=minutes * every)).date() != when.date()
        labels.append(when.strftime("%a %d %b\n%H:%M" if day else "%H:%M"))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlabel("time (UTC)", fontsize=9)


def render_png(plans: list[dict[str, Any]], *, node_size: int | None = None,
               step_minutes: int | None = None, start: datetime | str | None = None) -> bytes:
    """PNG bytes for plan dicts (as written by `gpuplan plan` / `plan-day`), one panel each.

    `node_size`, `step_minutes` and `start` override what the plan dicts say (plan-day's
    plan.json carries `start`, `step_minutes` and `node_size`; a bare plan does not).
    """
    kinds: dict[str, str] = {}
    for p in plans:
        kinds.update(p.get("kinds", {}))
    ids = sorted({c for p in plans for row in p["grid"] for c in row if c is not None},
                 key=lambda j: (list(FAMILIES).index(kinds.get(j, "training"))
                                if kinds.get(j, "training") in FAMILIES else 9, j))
    colour = _colours(ids, kinds)
    services = [j for j in ids if kinds.get(j) == "realtime"]
    hatch = {j: HATCHES[i % len(HATCHES)] for i, j in enumerate(services)}
    clock, minutes = _clock(plans)
    if isinstance(start, str):
        clock = _clock([{"start": start}])[0]
    elif start is not None:
        clock = start
    minutes = step_minutes or minutes
    node = int(node_size or (plans[0].get("node_size") if plans else 0) or 8)
    G = max((len(p["grid"][0]) for p in plans if p["grid"]), default=1)
    T = max((len(p["grid"]) for p in plans), default=1)
    # a GPU row is ROW_H_IN high, the panel at most MAX_PANEL_IN (big clusters: thinner rows)
    panel_h = [max(1.6, min(ROW_H_IN * len(p["grid"][0]), MAX_PANEL_IN) + 1.0)
               if p["grid"] else 1.6 for p in plans]
    numbered: list[str] = []  # jobs whose box is too small for the id: number -> id

    legend_rows = 0  # known once the labels are placed
    top_in, gap_in = 0.75, 0.95  # the title; between panels (a panel's title and x labels)
    fig = plt.figure(figsize=(FIG_WIDTH_IN, sum(panel_h) + 2.0), dpi=DPI)
    spec = fig.add_gridspec(len(plans), 1, height_ratios=panel_h,
                            hspace=gap_in / (sum(panel_h) / len(panel_h)))
    axes = [fig.add_subplot(spec[i, 0]) for i in range(len(plans))]
    plot_w_in = FIG_WIDTH_IN * 0.86
    for ax, plan, h in zip(axes, plans, panel_h, strict=True):
        grid = plan["grid"]
        rows = len(grid[0]) if grid else G
        cell_w = plot_w_in / max(T, 1)
        cell_h = (h - 1.0) / max(rows, 1)
        starts = plan.get("starts") or {}
        drawn_rt: set[str] = set()
        for job in ids:
            kind = kinds.get(job, "training")
            if kind == "realtime":
                best = None
                for g in range(rows):
                    for s, e in _runs(grid, job, g):
                        ax.add_patch(Rectangle((s, g), e - s, 1, facecolor=colour[job],
                                               edgecolor="darkred", linewidth=0.8,
                                               hatch=hatch[job]))
                        if best is None or e - s > best[1] - best[0]:
                            best = (s, e, g)
                if best is not None and job not in drawn_rt:
                    drawn_rt.add(job)
                    _label(ax, job, best[0], best[2], best[1] - best[0], 1, cell_w, cell_h,
                           numbered, realtime=True)
                continue
            where = starts.get(job)
            if where is None:  # a plan dict without starts: find the block in the grid
                cells = [(t, g) for t, row in enumerate(grid) for g, c in enumerate(row)
                         if c == job]
                if not cells:
                    continue
                where = {"start": min(t for t, _ in cells), "end": max(t for t, _ in cells) + 1,
                         "first_gpu": min(g for _, g in cells)}
            held = [g for g in range(rows) if any(row[g] == job for row in grid)]
            if not held:
                continue
            s, e, first = where["start"], where["end"], where["first_gpu"]
            width = len(held)
            ax.add_patch(Rectangle((s, first), e - s, width, facecolor=colour[job],
                                   edgecolor="black", linewidth=0.6))
            # a box over several nodes is labelled in its first node, off the node line
            _label(ax, job, s, first, e - s, min(width, node), cell_w, cell_h, numbered)
        for b in range(0, rows + 1, node):
            ax.axhline(b, color="black", linewidth=1.6 if rows // node <= 64 else 0.4)
        if rows % node:
            ax.axhline(rows, color="black", linewidth=1.6)
        m = plan.get("metrics", {})
        ax.set_title(f"{plan.get('policy', '?')}: utilization "
                     f"{100 * m.get('utilization', 0):.1f}%, value {m.get('value', 0):g}, "
                     f"completed {m.get('completed', 0)}, realtime shortfall "
                     f"{m.get('rt_shortfall', 0)} GPU-steps", fontsize=10, loc="left")
        ax.set_xlim(0, T)
        ax.set_ylim(rows, 0)
        ax.set_ylabel(f"GPU (nodes of {node})", fontsize=9)
        ax.set_yticks([b + node / 2 for b in range(0, rows, node)] if rows > node
                      else [g + 0.5 for g in range(rows)])
        if rows > node:
            ax.set_yticklabels([f"node {b // node}\nGPU {b}-{min(b + node, rows) - 1}"
                                for b in range(0, rows, node)], fontsize=7)
        else:
            ax.set_yticklabels([str(g) for g in range(rows)], fontsize=7)
        ax.set_xticks(range(T + 1), minor=True)
        ax.grid(axis="x", which="minor", color="0.85", linewidth=0.4)
        ax.set_axisbelow(True)
        _ticks(ax, T, clock, minutes)
    handles = [Patch(facecolor=plt.get_cmap(FAMILIES[k])(0.6), edgecolor="black",
                     label=KIND_LABELS[k])
               for k in FAMILIES if k != "realtime" and any(kinds.get(j) == k for j in ids)]
    handles += [Patch(facecolor=colour[j], edgecolor="darkred", hatch=hatch[j],
                      label=f"realtime: {j}") for j in services[:8]]
    numbered_text = [f"{i + 1} = {job}" for i, job in enumerate(numbered[:MAX_LEGEND])]
    if len(numbered) > MAX_LEGEND:
        numbered_text.append(f"... {len(numbered) - MAX_LEGEND} more")
    fig.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.02, 0.0), ncol=2,
               fontsize=8, frameon=False, title="kind", title_fontsize=8)
    if numbered_text:
        width = max(len(t) for t in numbered_text) + 3
        per_row = max(1, int(FIG_WIDTH_IN * 0.58 / (CHAR_W_IN * 1.05 * width)))
        legend_rows = -(-len(numbered_text) // per_row)
        cols = [numbered_text[i::legend_rows] for i in range(legend_rows)]
        text = "\n".join("".join(f"{c:<{width}}" for c in row) for row in cols)
        fig.text(0.4, 0.008, "small boxes:\n" + text, fontsize=7, family="monospace",
                 va="bottom")
    name = plans[0].get("scenario", "") if plans else ""
    legend_lines = max(legend_rows + 1, (len(handles) + 1) // 2 + 1)
    bottom_in = 0.95 + 0.16 * legend_lines  # x labels, then the legends
    height = top_in + sum(panel_h) + gap_in * (len(plans) - 1) + bottom_in
    fig.set_size_inches(FIG_WIDTH_IN, height)
    fig.suptitle(f"gpuplan: {name}", fontsize=12, x=0.06, ha="left",
                 y=1 - 0.12 / height)
    fig.subplots_adjust(left=0.09, right=0.965, top=1 - top_in / height,
                        bottom=bottom_in / height)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def _label(ax: Axes, job: str, x: float, y: float, w: float, h: float, cell_w: float,
           cell_h: float, numbered: list[str], realtime: bool = False) -> None:
    """The id inside the box when it fits (horizontally, or turned for tall boxes),
    else a number listed below the picture."""
    box_w, box_h = w * cell_w, h * cell_h
    need = CHAR_W_IN * len(job) + 0.1
    cx, cy = x + w / 2, y + h / 2
    style: dict[str, Any] = {"ha": "center", "va": "center", "fontsize": 7, "clip_on": True,
             "bbox": {"boxstyle": "round,pad=0.12", "facecolor": (1, 1, 1, 0.75),
                      "edgecolor": "darkred" if realtime else "none", "linewidth": 0.6}}
    if box_w >= need and box_h >= 0.12:
        ax.text(cx, cy, job, **style)
    elif box_h >= need and box_w >= 0.12:
        ax.text(cx, cy, job, rotation=90, **style)
    else:
        if job not in numbered:
            numbered.append(job)
        number = str(numbered.index(job) + 1)
        if box_w >= CHAR_W_IN * len(number) + 0.04 and box_h >= 0.1:
            ax.text(cx, cy, number, **{**style, "fontsize": 6,
                                       "bbox": {**style["bbox"], "pad": 0.05}})
