"""Every bad-input rule of MODEL.md's fine print, and what it explicitly allows.

A broken rule must raise InputError naming the job and the field (so the CLI can print
one line and exit 2); an unusual-but-allowed scenario must load. The CLI is checked
end to end: exit 2, one stderr line naming the file, and no output file written.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from typer.testing import CliRunner

from allocator import grid as gridlib
from allocator.core.errors import InputError
from allocator.model import BatchJob, RealtimeJob
from allocator.policies import POLICIES
from allocator.scenario_io import (
    load_scenario,
    parse_scenario,
    scenario_from_dict,
    scenario_to_dict,
)
from allocator.validator import compute_metrics, metrics_agree, violations
from tests.strategies import scenario_dicts


def base() -> dict[str, Any]:
    """A legal scenario touching every field; each bad case breaks exactly one rule of it."""
    return {
        "name": "base",
        "cluster": {"gpus": 8, "node_size": 8, "step_minutes": 60, "horizon_steps": 4},
        "weights": {"realtime_penalty": 8.0, "decay": 0.97},
        "jobs": [
            {"id": "chat", "kind": "realtime", "priority": 10, "demand": [1, 2, 2, 1],
             "swap_limit": 2, "current_gpus": [7]},
            {"id": "sft", "kind": "training", "priority": 5, "gpus": 4,
             "duration_steps": 3, "arrival_step": 0},
            {"id": "awq", "kind": "quantization", "priority": 3, "gpus": 2,
             "duration_steps": 2, "arrival_step": 1,
             "running": {"first_gpu": 4, "remaining_steps": 1}},
            {"id": "score", "kind": "batch_inference", "priority": 1.5, "gpus": 1,
             "duration_steps": 1},
        ],
    }


def edit(change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    d = base()
    change(d)
    return d


def job(d: dict[str, Any], job_id: str) -> dict[str, Any]:
    return next(j for j in d["jobs"] if j["id"] == job_id)


def setter(job_id: str | None, path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set `path` (dotted) inside job `job_id`, or inside the scenario when job_id is None."""
    def change(d: dict[str, Any]) -> None:
        node = d if job_id is None else job(d, job_id)
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return change


def deleter(job_id: str | None, path: str) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        node = d if job_id is None else job(d, job_id)
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[key]
        del node[leaf]
    return change


def test_base_is_legal() -> None:
    """The starting point of every bad case loads, so each case fails for its own reason."""
    s = scenario_from_dict(base())
    assert [j.id for j in s.jobs] == ["chat", "sft", "awq", "score"]


# (case name, change, job named in the error, field named in the error)
BAD: list[tuple[str, Callable[[dict[str, Any]], Any], str | None, str]] = [
    ("cluster missing", deleter(None, "cluster"), None, "cluster"),
    ("cluster.gpus missing", deleter(None, "cluster.gpus"), None, "cluster.gpus"),
    ("horizon_steps missing", deleter(None, "cluster.horizon_steps"), None,
     "cluster.horizon_steps"),
    ("cluster.gpus 0", setter(None, "cluster.gpus", 0), None, "cluster.gpus"),
    ("horizon_steps 0", setter(None, "cluster.horizon_steps", 0), None,
     "cluster.horizon_steps"),
    ("node_size 0", setter(None, "cluster.node_size", 0), None, "cluster.node_size"),
    ("node_size -8", setter(None, "cluster.node_size", -8), None, "cluster.node_size"),
    ("step_minutes 0", setter(None, "cluster.step_minutes", 0), None, "cluster.step_minutes"),
    ("step_minutes -60", setter(None, "cluster.step_minutes", -60), None,
     "cluster.step_minutes"),
    # integer fields given as 4.0 or true
    ("cluster.gpus 8.0", setter(None, "cluster.gpus", 8.0), None, "cluster.gpus"),
    ("cluster.gpus true", setter(None, "cluster.gpus", True), None, "cluster.gpus"),
    ("horizon_steps 4.0", setter(None, "cluster.horizon_steps", 4.0), None,
     "cluster.horizon_steps"),
    ("node_size true", setter(None, "cluster.node_size", True), None, "cluster.node_size"),
    ("step_minutes 60.0", setter(None, "cluster.step_minutes", 60.0), None,
     "cluster.step_minutes"),
    ("gpus 4.0", setter("sft", "gpus", 4.0), "sft", "gpus"),
    ("gpus true", setter("score", "gpus", True), "score", "gpus"),
    ("duration_steps 3.0", setter("sft", "duration_steps", 3.0), "sft", "duration_steps"),
    ("duration_steps true", setter("sft", "duration_steps", True), "sft", "duration_steps"),
    ("arrival_step 0.0", setter("sft", "arrival_step", 0.0), "sft", "arrival_step"),
    ("arrival_step false", setter("sft", "arrival_step", False), "sft", "arrival_step"),
    ("first_gpu 4.0", setter("awq", "running.first_gpu", 4.0), "awq", "running.first_gpu"),
    ("remaining_steps true", setter("awq", "running.remaining_steps", True), "awq",
     "running.remaining_steps"),
    ("swap_limit 2.0", setter("chat", "swap_limit", 2.0), "chat", "swap_limit"),
    ("swap_limit true", setter("chat", "swap_limit", True), "chat", "swap_limit"),
    ("demand entry 2.0", setter("chat", "demand", [1, 2.0, 2, 1]), "chat", "demand[1]"),
    ("demand entry true", setter("chat", "demand", [1, 2, True, 1]), "chat", "demand[2]"),
    ("current_gpus entry 7.0", setter("chat", "current_gpus", [7.0]), "chat", "current_gpus"),
    ("current_gpus entry true", setter("chat", "current_gpus", [True]), "chat",
     "current_gpus"),
    # weights
    ("decay 0", setter(None, "weights.decay", 0), None, "weights.decay"),
    ("decay negative", setter(None, "weights.decay", -0.5), None, "weights.decay"),
    ("decay above 1", setter(None, "weights.decay", 1.01), None, "weights.decay"),
    ("decay a string", setter(None, "weights.decay", "0.9"), None, "weights.decay"),
    ("penalty negative", setter(None, "weights.realtime_penalty", -1), None,
     "weights.realtime_penalty"),
    ("penalty true", setter(None, "weights.realtime_penalty", True), None,
     "weights.realtime_penalty"),
    ("swap_limit negative", setter("chat", "swap_limit", -1), "chat", "swap_limit"),
    ("swap_limit missing", deleter("chat", "swap_limit"), "chat", "swap_limit"),
    # ids and kinds
    ("empty id", setter("sft", "id", ""), "#1", "id"),
    ("missing id", deleter("score", "id"), "#3", "id"),
    ("id not a string", setter("score", "id", 3), "#3", "id"),
    ("duplicate id", setter("score", "id", "sft"), "sft", "id"),
    ("unknown kind", setter("sft", "kind", "finetune"), "sft", "kind"),
    ("missing kind", deleter("sft", "kind"), "sft", "kind"),
    # priorities
    ("priority 0", setter("sft", "priority", 0), "sft", "priority"),
    ("priority negative", setter("chat", "priority", -2.5), "chat", "priority"),
    ("priority missing", deleter("sft", "priority"), "sft", "priority"),
    ("priority true", setter("sft", "priority", True), "sft", "priority"),
    ("priority a string", setter("sft", "priority", "5"), "sft", "priority"),
    # block sizes
    ("gpus not a power of two", setter("sft", "gpus", 3), "sft", "gpus"),
    ("gpus 6", setter("sft", "gpus", 6), "sft", "gpus"),
    ("gpus above G", setter("sft", "gpus", 16), "sft", "gpus"),
    ("gpus 0", setter("sft", "gpus", 0), "sft", "gpus"),
    ("gpus negative", setter("sft", "gpus", -4), "sft", "gpus"),
    ("duration 0", setter("sft", "duration_steps", 0), "sft", "duration_steps"),
    ("duration missing", deleter("sft", "duration_steps"), "sft", "duration_steps"),
    ("arrival negative", setter("sft", "arrival_step", -1), "sft", "arrival_step"),
    # running blocks
    ("remaining 0", setter("awq", "running.remaining_steps", 0), "awq",
     "running.remaining_steps"),
    ("remaining above duration", setter("awq", "running.remaining_steps", 3), "awq",
     "running.remaining_steps"),
    ("remaining missing", deleter("awq", "running.remaining_steps"), "awq",
     "running.remaining_steps"),
    ("running block past the end", setter("awq", "running.first_gpu", 7), "awq",
     "running.first_gpu"),
    ("running block outside", setter("awq", "running.first_gpu", 8), "awq",
     "running.first_gpu"),
    ("running block negative", setter("awq", "running.first_gpu", -2), "awq",
     "running.first_gpu"),
    ("running not an object", setter("awq", "running", [4, 1]), "awq", "running"),
    ("running blocks overlap",
     lambda d: (job(d, "sft").update(running={"first_gpu": 4, "remaining_steps": 1}),
                job(d, "chat").update(current_gpus=[0])),
     "awq", "running.first_gpu"),
    # current_gpus
    ("current_gpus repeated", setter("chat", "current_gpus", [7, 6, 7]), "chat",
     "current_gpus"),
    ("current_gpus outside", setter("chat", "current_gpus", [8]), "chat", "current_gpus"),
    ("current_gpus negative", setter("chat", "current_gpus", [-1]), "chat", "current_gpus"),
    ("current_gpus on a running block", setter("chat", "current_gpus", [5]), "chat",
     "current_gpus"),
    ("current_gpus shared with another realtime job",
     lambda d: d["jobs"].append({"id": "chat2", "kind": "realtime", "priority": 1,
                                 "demand": [0, 0, 0, 0], "swap_limit": 0,
                                 "current_gpus": [6, 7]}),
     "chat2", "current_gpus"),
    ("current_gpus not a list", setter("chat", "current_gpus", 7), "chat", "current_gpus"),
    # demand
    ("demand too short", setter("chat", "demand", [1, 2, 2]), "chat", "demand"),
    ("demand too long", setter("chat", "demand", [1, 2, 2, 1, 1]), "chat", "demand"),
    ("demand missing", deleter("chat", "demand"), "chat", "demand"),
    ("demand negative", setter("chat", "demand", [1, -1, 2, 1]), "chat", "demand[1]"),
    ("demand fractional", setter("chat", "demand", [1, 2, 2.5, 1]), "chat", "demand[2]"),
    ("demand a string", setter("chat", "demand", "1,2,2,1"), "chat", "demand"),
]


@pytest.mark.parametrize(("change", "job_id", "field"), [c[1:] for c in BAD],
                         ids=[c[0] for c in BAD])
def test_bad_input_names_job_and_field(change: Callable, job_id: str | None,
                                       field: str) -> None:
    """Each rule of the fine print, broken alone, is refused with its job and field named."""
    d = edit(change)
    with pytest.raises(InputError) as caught:
        scenario_from_dict(d)
    assert (caught.value.job, caught.value.field) == (job_id, field), caught.value.line()
    # The JSON text path must give the same error.
    with pytest.raises(InputError) as again:
        parse_scenario(json.dumps(d))
    assert (again.value.job, again.value.field) == (job_id, field)


def text_with(token: str, where: str) -> str:
    """The base scenario as JSON text with one number replaced by a raw token (NaN & co)."""
    d = base()
    marker = 123456789
    {
        "decay": setter(None, "weights.decay", marker),
        "penalty": setter(None, "weights.realtime_penalty", marker),
        "cluster.gpus": setter(None, "cluster.gpus", marker),
        "priority": setter("sft", "priority", marker),
        "demand": setter("chat", "demand", [1, marker, 2, 1]),
        "running": setter("awq", "running.remaining_steps", marker),
        "unknown job field": setter("score", "note", marker),
        "unknown top field": setter(None, "extra", {"deep": [marker]}),
    }[where](d)
    text = json.dumps(d)
    assert str(marker) in text
    return text.replace(str(marker), token)


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]
WHERE = {  # where the token goes -> the job the error must name
    "decay": None, "penalty": None, "cluster.gpus": None, "priority": "sft",
    "demand": "chat", "running": "awq", "unknown job field": "score",
    "unknown top field": None,
}


@pytest.mark.parametrize("token", NON_FINITE)
@pytest.mark.parametrize("where", WHERE)
def test_nan_and_infinity_are_rejected_everywhere(token: str, where: str) -> None:
    """NaN, +-Infinity and numbers overflowing to it, in any field, known or not."""
    with pytest.raises(InputError) as caught:
        parse_scenario(text_with(token, where))
    assert caught.value.job == WHERE[where], caught.value.line()
    assert caught.value.field


@pytest.mark.parametrize("jobs", ["[NaN]", "[[NaN]]", "[[1, Infinity]]"])
def test_nan_as_a_job_entry_is_bad_input(jobs: str) -> None:
    """A NaN where a job object belongs must be an InputError, not a crash."""
    with pytest.raises(InputError):
        parse_scenario('{"cluster": {"gpus": 2, "horizon_steps": 2}, "jobs": ' + jobs + "}")


@pytest.mark.parametrize("field", ["priority", "realtime_penalty"])
def test_an_integer_too_large_for_a_float_is_bad_input(field: str) -> None:
    """A 400-digit integer overflows to Infinity as a float: refused like 1e400."""
    huge = "1" + "0" * 400
    d = base()
    if field == "priority":
        job(d, "sft")["priority"] = 7
        text = json.dumps(d).replace('"priority": 7', f'"priority": {huge}')
    else:
        d["weights"]["realtime_penalty"] = 7
        text = json.dumps(d).replace('"realtime_penalty": 7', f'"realtime_penalty": {huge}')
    with pytest.raises(InputError):
        parse_scenario(text)


def test_an_integer_with_too_many_digits_is_bad_input() -> None:
    """Python refuses ints over 4300 digits; that must surface as InputError, not a crash."""
    text = '{"cluster": {"gpus": 1' + "0" * 5000 + ', "horizon_steps": 2}}'
    with pytest.raises(InputError):
        parse_scenario(text)


def test_bad_json_text_is_input_error() -> None:
    """Not JSON at all, or not an object: InputError, not a traceback."""
    for text in ["", "{", "[1, 2]", '"scenario"', "null"]:
        with pytest.raises(InputError):
            parse_scenario(text)


# -- what is allowed ----------------------------------------------------------------------------

ALLOWED: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("unknown top-level field", setter(None, "owner", "team-a")),
    ("unknown cluster field", setter(None, "cluster.region", "eu")),
    ("unknown weights field", setter(None, "weights.note", "x")),
    ("unknown job field", setter("sft", "model", "7b")),
    ("unknown running field", setter("awq", "running.since", "yesterday")),
    ("running null", setter("awq", "running", None)),
    ("current_gpus null", setter("chat", "current_gpus", None)),
    ("current_gpus empty", setter("chat", "current_gpus", [])),
    ("demand above G", setter("chat", "demand", [9, 100, 0, 8])),
    ("demand all zero", setter("chat", "demand", [0, 0, 0, 0])),
    ("arrival at T", setter("sft", "arrival_step", 4)),
    ("arrival far past T", setter("sft", "arrival_step", 1000)),
    ("duration longer than T", setter("sft", "duration_steps", 50)),
    ("remaining longer than T", lambda d: job(d, "awq").update(
        duration_steps=20, running={"first_gpu": 4, "remaining_steps": 10})),
    ("running job arriving later", setter("awq", "arrival_step", 3)),
    ("empty job list", setter(None, "jobs", [])),
    ("no job list", deleter(None, "jobs")),
    ("no name", deleter(None, "name")),
    ("name null", setter(None, "name", None)),
    ("no weights", deleter(None, "weights")),
    ("no node_size or step_minutes", lambda d: d.update(
        cluster={"gpus": 8, "horizon_steps": 4})),
    ("decay exactly 1", setter(None, "weights.decay", 1)),
    ("penalty 0", setter(None, "weights.realtime_penalty", 0)),
    ("swap_limit 0", setter("chat", "swap_limit", 0)),
    ("fractional priority", setter("score", "priority", 0.001)),
    ("gpus equal to G", setter("sft", "gpus", 8)),
    ("G not a power of two", lambda d: d.update(
        cluster={"gpus": 6, "horizon_steps": 4},
        jobs=[j for j in d["jobs"] if j["id"] != "chat"])),
]


@pytest.mark.parametrize("change", [c[1] for c in ALLOWED], ids=[c[0] for c in ALLOWED])
def test_unusual_but_allowed_input_loads(change: Callable) -> None:
    """What MODEL.md explicitly allows must load, and every policy must plan it legally."""
    s = scenario_from_dict(edit(change))
    for policy in ("fast", "fifo", "priority"):
        grid = POLICIES[policy](s)
        assert violations(s, gridlib.to_ids(s, grid)) == [], policy


def test_defaults_fill_in() -> None:
    """node_size 8, step_minutes 60, decay 0.97, penalty 8, arrival 0, name '' by default."""
    s = scenario_from_dict({"cluster": {"gpus": 2, "horizon_steps": 1}, "jobs": [
        {"id": "a", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 1}]})
    assert (s.cluster.node_size, s.cluster.step_minutes) == (8, 60)
    assert (s.weights.decay, s.weights.realtime_penalty) == (0.97, 8.0)
    assert s.jobs[0].arrival_step == 0 and s.name == ""


def test_null_means_absent() -> None:
    """running: null and current_gpus: null load exactly as if the key were missing."""
    with_null = edit(lambda d: (setter("awq", "running", None)(d),
                                setter("chat", "current_gpus", None)(d)))
    without = edit(lambda d: (deleter("awq", "running")(d), deleter("chat", "current_gpus")(d)))
    assert scenario_from_dict(with_null) == scenario_from_dict(without)


def test_unknown_fields_change_nothing() -> None:
    """Ignored means ignored: the typed scenario is the same with or without them."""
    noisy = edit(lambda d: (d.update(extra=1), job(d, "sft").update(note="n"),
                            d["cluster"].update(rack="r1")))
    assert scenario_from_dict(noisy) == scenario_from_dict(base())


@given(d=scenario_dicts())
def test_generated_scenarios_load_and_round_trip(d: dict[str, Any]) -> None:
    """Every strategy-drawn dict is legal; JSON text, dict and to_dict agree on the scenario."""
    s = scenario_from_dict(copy.deepcopy(d))
    assert parse_scenario(json.dumps(d)) == s
    assert scenario_from_dict(scenario_to_dict(s)) == s
    assert json.loads(json.dumps(scenario_to_dict(s))) == scenario_to_dict(s)
    kinds = {j["id"]: j["kind"] for j in d["jobs"]}
    for j in s.jobs:
        assert isinstance(j, RealtimeJob) == (kinds[j.id] == "realtime")
        assert isinstance(j, BatchJob) == (kinds[j.id] != "realtime")


def test_load_scenario_names_the_file(tmp_path: Path) -> None:
    """The loader adds the file to the error, so the CLI's one line says where."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(edit(setter("sft", "gpus", 3))))
    with pytest.raises(InputError) as caught:
        load_scenario(bad)
    assert caught.value.file == str(bad)
    assert str(bad) in caught.value.line() and "sft" in caught.value.line()
    with pytest.raises(InputError) as missing:
        load_scenario(tmp_path / "nope.json")
    assert missing.value.file == str(tmp_path / "nope.json")


# -- the CLI ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def app():
    from pipelines.cli import build_app

    return build_app()


def invoke(app, *args: str):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_cli_plan_writes_a_legal_plan(app, tmp_path: Path, policy: str) -> None:
    """Exit 0, and the plan file passes the outside checker: legal grid, metrics agree."""
    src = tmp_path / "s.json"
    src.write_text(json.dumps(base()))
    out = tmp_path / "plan.json"
    result = invoke(app, "plan", str(src), "--policy", policy, "--out", str(out))
    assert result.exit_code == 0, result.output
    body = json.loads(out.read_text())
    s = load_scenario(src)
    assert body["policy"] == policy
    assert violations(s, body["grid"]) == []
    assert metrics_agree(body["metrics"], compute_metrics(s, body["grid"])) == []
    assert isinstance(body["latency_ms"], float)


CLI_BAD = {
    "bad field": (json.dumps(edit(setter("sft", "gpus", 3))), ["sft", "gpus"]),
    "NaN in a job": (text_with("NaN", "priority"), ["sft", "priority"]),
    "overlapping current_gpus": (json.dumps(edit(setter("chat", "current_gpus", [4]))),
                                 ["chat", "current_gpus"]),
    "not JSON": ("{ nope", []),
    "missing horizon": (json.dumps(edit(deleter(None, "cluster.horizon_steps"))),
                        ["horizon_steps"]),
}


@pytest.mark.parametrize(("text", "names"), CLI_BAD.values(), ids=CLI_BAD.keys())
def test_cli_bad_input_exits_2_with_one_line(app, tmp_path: Path, text: str,
                                             names: list[str]) -> None:
    """Exit 2, exactly one stderr line naming file, job and field, and no output file."""
    src = tmp_path / "bad scenario.json"
    src.write_text(text)
    out = tmp_path / "plan.json"
    result = invoke(app, "plan", str(src), "--out", str(out))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(src) in lines[0]
    for name in names:
        assert name in lines[0]
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad scenario.json"]  # no temp left


def test_cli_bad_input_leaves_an_existing_plan_untouched(app, tmp_path: Path) -> None:
    """A failed run must not truncate or replace the previous plan file."""
    src = tmp_path / "s.json"
    src.write_text(json.dumps(edit(setter("chat", "swap_limit", -1))))
    out = tmp_path / "plan.json"
    out.write_text("previous plan\n")
    os.utime(out, (1_000_000, 1_000_000))
    result = invoke(app, "plan", str(src), "--out", str(out))
    assert result.exit_code == 2
    assert out.read_text() == "previous plan\n"
    assert out.stat().st_mtime == 1_000_000


def test_cli_missing_file_exits_2(app, tmp_path: Path) -> None:
    """A scenario path that does not exist is bad input too, named in the one line."""
    missing = tmp_path / "absent.json"
    result = invoke(app, "plan", str(missing), "--out", str(tmp_path / "p.json"))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0]
    assert not (tmp_path / "p.json").exists()


def test_cli_nan_job_entry_exits_2(app, tmp_path: Path) -> None:
    """NaN where a job object belongs: one line and exit 2 (it once crashed the loader)."""
    src = tmp_path / "s.json"
    src.write_text('{"cluster": {"gpus": 2, "horizon_steps": 2}, "jobs": [NaN]}')
    result = invoke(app, "plan", str(src), "--out", str(tmp_path / "p.json"))
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and str(src) in result.stderr
    assert not (tmp_path / "p.json").exists()


def test_cli_unknown_policy_exits_2(app, tmp_path: Path) -> None:
    """--policy outside the registry is bad input: exit 2, nothing written."""
    src = tmp_path / "s.json"
    src.write_text(json.dumps(base()))
    result = invoke(app, "plan", str(src), "--policy", "best", "--out", str(tmp_path / "p.json"))
    assert result.exit_code == 2
    assert not (tmp_path / "p.json").exists()


def test_installed_command_prints_exactly_one_line(tmp_path: Path) -> None:
    """The real `gpuplan` process: no warnings or traceback beside the one error line."""
    exe = Path(sys.executable).parent / "gpuplan"
    if not exe.exists():
        pytest.skip("gpuplan is not installed in this environment")
    src = tmp_path / "s.json"
    src.write_text(json.dumps(edit(setter("awq", "running.first_gpu", 7))))
    out = tmp_path / "p.json"
    done = subprocess.run([str(exe), "plan", str(src), "--out", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(src) in lines[0] and "awq" in lines[0] and "running.first_gpu" in lines[0]
    assert not out.exists()


def test_an_index_of_the_other_kind_is_refused_not_misread() -> None:
    """batch_job_at / realtime_job_at narrow a job index for the planner's code; an index of
    the other kind is a bug there, raised at once rather than read as the wrong job."""
    scenario = load_scenario(
        Path(__file__).resolve().parents[1] / "data" / "scenarios" / "mixed-control.json")
    batch = next(i for i, j in enumerate(scenario.jobs) if isinstance(j, BatchJob))
    service = next(i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob))
    assert scenario.batch_job_at(batch) is scenario.jobs[batch]
    assert scenario.realtime_job_at(service) is scenario.jobs[service]
    with pytest.raises(TypeError, match="not a batch job"):
        scenario.batch_job_at(service)
    with pytest.raises(TypeError, match="not a realtime job"):
        scenario.realtime_job_at(batch)
