"""PROFILE.json: one schema for writer and reader; any missing, extra or mistyped field is
bad input (exit 2, one line naming the file and the field), never a silent default."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from allocator.core.errors import InputError
from allocator.scenario_io import load_scenario
from forecasting.profile_file import ProfileFile
from tests.pipeline_fixtures import scored_queue, write_inputs

START = "2026-11-30T00:00:00Z"  # the hour after the fixture's traffic ends


def gpuplan(*args: str):
    from pipelines.cli import build_app

    return CliRunner().invoke(build_app(args[0]), list(args))


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[dict[str, Path], Path]:
    """The fixture's inputs and the PROFILE.json `gpuplan profile` wrote for them."""
    root = tmp_path_factory.mktemp("profile")
    inputs = write_inputs(root / "in")
    out = root / "PROFILE.json"
    result = gpuplan("profile", str(inputs["traffic"]), "--services", str(inputs["services"]),
                     "--start", START, "--steps", "24", "--out", str(out))
    assert result.exit_code == 0, result.output
    return inputs, out


def test_round_trip_is_byte_for_byte(written):
    _, path = written
    text = path.read_text(encoding="utf-8")
    doc = ProfileFile.read(path)
    assert doc.to_json() == text
    assert ProfileFile.from_json(doc.to_json()) == doc
    assert [s.service for s in doc.services] == ["chat", "code"]
    assert [s.swap_limit for s in doc.services] == [2, 1]  # the services' own, not a default
    assert all(len(s.demand) == 24 and len(s.profile) == 168 for s in doc.services)


def test_plan_day_plans_with_the_profile_as_written(written, tmp_path):
    inputs, path = written
    doc = ProfileFile.read(path)
    result = gpuplan("plan-day", "--queue", str(scored_queue(tmp_path / "queue.csv")),
                     "--cluster", str(inputs["cluster"]), "--profile", str(path),
                     "--running", str(inputs["running"]), "--out-dir", str(tmp_path / "day"))
    assert result.exit_code == 0, result.output
    scenario = load_scenario(tmp_path / "day" / "scenario.json")
    realtime = {j.id: j for j in scenario.realtime_jobs}
    for entry in doc.services:
        job = realtime[entry.service]
        assert (job.demand, job.swap_limit, job.priority) == (
            entry.demand, entry.swap_limit, entry.priority)


def _without(*keys) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        *path, last = keys
        target = doc
        for key in path:
            target = target[key]
        del target[last]
    return change


def _setting(value, *keys) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        *path, last = keys
        target = doc
        for key in path:
            target = target[key]
        target[last] = value
    return change


BROKEN = [  # (what, change, the field the error names)
    ("no swap_limit", _without("services", 0, "swap_limit"), "services[0].swap_limit"),
    ("no priority", _without("services", 1, "priority"), "services[1].priority"),
    ("no quantile", _without("quantile"), "quantile"),
    ("no start", _without("start"), "start"),
    ("an extra top-level field", _setting("x", "note"), "note"),
    ("an extra service field", _setting(True, "services", 0, "growing"),
     "services[0].growing"),
    ("swap_limit as text", _setting("2", "services", 0, "swap_limit"), "swap_limit"),
    ("a fractional GPU", _setting(1.5, "services", 0, "demand", 3), "demand[3]"),
    ("step_minutes as text", _setting("60", "step_minutes"), "step_minutes"),
    ("priority as a boolean", _setting(True, "services", 1, "priority"), "priority"),
    ("a negative ceiling", _setting(-1, "services", 0, "ceiling_gpus"), "ceiling_gpus"),
    ("a start that is no time", _setting("monday", "start"), "start"),
    ("services not a list", _setting({}, "services"), "services"),
    ("a profile value as text", _setting("1", "services", 0, "profile", 0), "profile[0]"),
]


@pytest.mark.parametrize(("what", "change", "field"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_field_is_named_and_plans_nothing(written, tmp_path, what,
                                                   change, field):
    inputs, path = written
    doc = json.loads(path.read_text())
    change(doc)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(doc))
    with pytest.raises(InputError) as caught:
        ProfileFile.read(broken)
    assert caught.value.field == field and caught.value.file == str(broken)
    out = tmp_path / "day"
    result = gpuplan("plan-day", "--queue", str(scored_queue(tmp_path / "queue.csv")),
                     "--cluster", str(inputs["cluster"]), "--profile", str(broken),
                     "--out-dir", str(out))
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpuplan: error: "), result.output
    assert str(broken) in lines[0] and f"field {field!r}" in lines[0]
    assert not out.exists()


def test_not_json_is_named(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('{"start": NaN}')
    with pytest.raises(InputError, match="not valid JSON") as caught:
        ProfileFile.read(bad)
    assert caught.value.file == str(bad)
