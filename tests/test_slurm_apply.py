"""Plan -> scontrol actions, against a given Slurm state (the real cluster is in test_slurm_e2e)."""

from __future__ import annotations

import dataclasses

import pytest

from allocator.core.errors import InputError
from pipelines.slurm.apply import (
    MARK,
    execute,
    nodes_for,
    plan_actions,
    read_plan,
    release_actions,
)
from pipelines.slurm.parse import Node, QueueJob

T0 = 1_800_000_000  # the plan's start, on the hour
STEP = 3600
NODES = [Node("n2", 8, "IDLE"), Node("n1", 8, "MIXED"), Node("login", 0, "IDLE")]


def job(jid: str, gpus: int, state: str = "PENDING", **kw) -> QueueJob:
    base = dict(id=jid, name=f"j{jid}", user="alice", state=state,
                reason="JobHeldUser" if state == "PENDING" else "None", gpus=gpus,
                time_limit_minutes=120, priority=0 if state == "PENDING"
                else 100, submit_time=T0 - 600, start_time=0, eligible_time=0, nodes=(),
                required_nodes=(), gpu_index={}, comment="", admin_comment="",
                reservation="")
    base.update(kw)
    return QueueJob(**base)


def plan_doc(reservations=None) -> dict:
    # 16 GPUs: n1 holds GPUs 0-7, n2 GPUs 8-15 (sorted by name). r1 runs on 0-3 since before.
    grid = [["r1"] * 4 + ["a"] * 2 + [None] * 2 + ["b"] * 4 + [None] * 4,
            [None] * 8 + ["c"] * 8]
    doc = {"scenario": "day", "policy": "fast", "grid": grid, "start": "2027-01-15T08:00:00Z",
           "step_minutes": 60,
           "starts": {"r1": {"start": 0, "end": 1, "first_gpu": 0},
                      "a": {"start": 0, "end": 1, "first_gpu": 4},
                      "b": {"start": 0, "end": 1, "first_gpu": 8},
                      "c": {"start": 1, "end": 2, "first_gpu": 8}},
           "unplaced": ["d"], "kinds": {}}
    if reservations is not None:
        doc["reservations"] = reservations
    return doc


def queue() -> list[QueueJob]:
    return [job("r1", 4, "RUNNING", nodes=("n1",)), job("a", 2), job("b", 4),
            job("c", 8), job("d", 1, priority=5, reason="Priority")]


def test_gpus_map_to_nodes_in_name_order():
    names = ["n1", "n2"]
    assert nodes_for(4, 2, names, 8) == ["n1"]
    assert nodes_for(8, 4, names, 8) == ["n2"]
    assert nodes_for(0, 16, names, 8) == ["n1", "n2"]
    with pytest.raises(InputError):
        nodes_for(16, 1, names, 8)


def test_actions_restrain_first_then_release_and_never_touch_running_work():
    view = read_plan(plan_doc())
    now = view.start.timestamp() + 60
    actions, notes = plan_actions(view, queue(), NODES, {}, now)
    lines = [a.line() for a in actions]
    kinds = [(a.job, a.what) for a in actions]
    assert ("r1", "start-now") not in kinds and not any(a.job == "r1" for a in actions)
    # c begins at step 1 on n2, released so that its begin time, not a hold, keeps it
    c = next(ln for ln in lines if "JobId=c" in ln)
    assert "Nodelist=n2" in c and "StartTime=" in c and f"AdminComment={MARK}" in c
    assert kinds.index(("d", "hold")) < kinds.index(("a", "start-now"))
    assert kinds.index(("c", "start-later")) < kinds.index(("b", "start-now"))
    assert "Nodelist=n1" in next(ln for ln in lines if "JobId=a" in ln)
    assert ("a", "release") in kinds and ("b", "release") in kinds
    assert notes == []


def test_the_same_plan_on_the_state_it_produced_is_a_no_op():
    view = read_plan(plan_doc())
    now = view.start.timestamp() + 60
    begin_c = view.start.timestamp() + STEP
    after = [job("r1", 4, "RUNNING", nodes=("n1",)),
             job("a", 2, "RUNNING", nodes=("n1",)), job("b", 4, "RUNNING", nodes=("n2",)),
             job("c", 8, priority=10, reason="BeginTime", required_nodes=("n2",),
                 eligible_time=int(begin_c)),
             job("d", 1, reason="JobHeldAdmin")]
    actions, _ = plan_actions(view, after, NODES, {}, now)
    assert actions == []
    # pending but placed as planned (the scheduler has not got to it yet): also nothing
    after[1] = job("a", 2, priority=10, reason="Priority", required_nodes=("n1",),
                   eligible_time=int(now - 5))
    assert plan_actions(view, after, NODES, {}, now)[0] == []


def test_a_reservation_becomes_a_whole_node_reservation_once():
    resv = [{"id": "c", "start": 1, "first_gpu": 8, "gpus": 8}]
    view = read_plan(plan_doc(resv))
    now = view.start.timestamp() + 60
    actions, _ = plan_actions(view, queue(), NODES, {}, now)
    create = [a.line() for a in actions if a.argv[0] == "create"]
    assert len(create) == 1
    assert "ReservationName=gpuplan-c" in create[0] and "Nodes=n2" in create[0]
    assert "Users=alice" in create[0] and "Duration=120" in create[0]
    assert any("ReservationName=gpuplan-c" in a.line() and a.argv[0] == "update"
               for a in actions)
    begin = view.start.timestamp() + STEP
    import time as _time
    existing = {"gpuplan-c": {"ReservationName": "gpuplan-c", "Nodes": "n2",
                              "StartTime": _time.strftime("%Y-%m-%dT%H:%M:%S",
                                                          _time.localtime(begin))},
                "gpuplan-old": {"ReservationName": "gpuplan-old", "Nodes": "n1"}}
    reserved = [dataclasses.replace(j, reservation="gpuplan-c") if j.id == "c" else j
                for j in queue()]
    again, _ = plan_actions(view, reserved, NODES, existing, now)
    assert not any(a.argv[0] == "create" for a in again)
    assert [a.line() for a in again if a.what == "unreserve"] == [
        "scontrol delete reservation gpuplan-old"]


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.pop("start"), "start"),
    (lambda d: d["starts"]["a"].update(first_gpu="4"), "starts.first_gpu"),
    (lambda d: d.update(reservations=[{"id": "c", "start": 1.5, "first_gpu": 8, "gpus": 8}]),
     "reservations.start"),
    (lambda d: d.update(grid=[]), "grid"),
])
def test_a_bad_plan_field_is_named(edit, field):
    doc = plan_doc()
    edit(doc)
    with pytest.raises(InputError) as err:
        read_plan(doc)
    assert err.value.field == field


def test_a_plan_for_another_cluster_is_refused():
    view = read_plan(plan_doc())
    with pytest.raises(InputError) as err:
        plan_actions(view, queue(), NODES[:1], {}, view.start.timestamp())
    assert err.value.field == "grid"


def test_a_plan_whose_committed_step_is_over_is_refused():
    view = read_plan(plan_doc())
    with pytest.raises(InputError) as err:
        plan_actions(view, queue(), NODES, {}, view.start.timestamp() + STEP)
    assert err.value.field == "start" and "plan again" in err.value.message


def test_execute_stops_at_the_first_failure_and_says_what_was_not_applied(tmp_path):
    view = read_plan(plan_doc())
    actions, _ = plan_actions(view, queue(), NODES, {}, view.start.timestamp())
    done = []

    def scontrol(argv):
        if argv == ("hold", "d"):
            raise RuntimeError("Invalid job id specified")
        done.append(argv)

    log = tmp_path / "apply.log"
    out = execute(actions, scontrol, log, "test")
    assert out.failed is not None and out.failed.argv == ("hold", "d")
    assert len(out.applied) + 1 + len(out.not_applied) == len(actions)
    assert [a.argv for a in out.applied] == done
    assert len(log.read_text().splitlines()) == len(out.applied) + 1


def test_release_all_undoes_only_what_gpuplan_marked():
    jobs = [job("a", 2, admin_comment=f"{MARK} fast plan"), job("x", 2),
            job("r", 4, "RUNNING", admin_comment=f"{MARK} fast plan")]
    actions = release_actions(jobs, {"gpuplan-c": {}, "maint": {}})
    lines = [a.line() for a in actions]
    assert lines == ["scontrol update JobId=a Nodelist= StartTime=now ReservationName= "
                     "AdminComment=", "scontrol release a",
                     "scontrol delete reservation gpuplan-c"]
