"""The grid picture an operator reads: clock time, node lines, ids on boxes, numbers else."""

from __future__ import annotations

import pytest

from allocator import render


@pytest.fixture
def drawn(monkeypatch):
    """render_png's figure, caught before it is closed."""
    figures = []
    monkeypatch.setattr(render.plt, "close", figures.append)
    return figures


def _plan(start=None):
    T, G = 24, 16
    grid = [[None] * G for _ in range(T)]
    for t in range(T):
        for g in range(0, 8):
            grid[t][g] = "a-long-training-job"
        grid[t][15] = "chat"
    grid[0][12] = "quant-tiny-job"  # one GPU for one step: too small for its id
    body = {"scenario": "s", "policy": "fast", "grid": grid,
            "metrics": {"utilization": 0.5, "value": 1, "rt_shortfall": 0, "completed": 1},
            "starts": {"a-long-training-job": {"start": 0, "end": 24, "first_gpu": 0},
                       "quant-tiny-job": {"start": 0, "end": 1, "first_gpu": 12}},
            "kinds": {"a-long-training-job": "training", "quant-tiny-job": "quantization",
                      "chat": "realtime"}}
    if start:
        body.update(start=start, step_minutes=60, node_size=8)
    return body


def test_clock_time_node_lines_labels_and_numbers(drawn):
    png = render.render_png([_plan("2026-11-30T06:00:00Z")])
    assert png.startswith(b"\x89PNG")
    fig = drawn[0]
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0].endswith("06:00") and "Mon 30 Nov" in ticks[0] and "08:00" in ticks
    assert "Tue 01 Dec\n00:00" in ticks and ticks[-1] == "06:00"  # a new day says which
    lines = sorted(line.get_ydata()[0] for line in ax.get_lines())
    assert lines == [0, 8, 16]  # node boundaries
    texts = {t.get_text() for t in ax.texts}
    assert {"a-long-training-job", "chat", "1"} <= texts and "quant-tiny-job" not in texts
    assert any("1 = quant-tiny-job" in t.get_text() for t in fig.texts)
    kinds = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"training", "quantization", "realtime: chat"} <= kinds


def test_without_a_start_the_axis_counts_hours_from_now(drawn):
    render.render_png([_plan()], node_size=8, step_minutes=30)
    ticks = [t.get_text() for t in drawn[0].axes[0].get_xticklabels()]
    assert ticks[0] == "+0h" and "+1h" in ticks and ticks[-1] == "+12h"
