"""Slurm's own outputs -> typed records. Both JSON generations are read:

- 22.05 (OpenAPI v0.0.38 / dbv0.0.38): `job_state` is a string, times and limits are plain
  integers, `sacct`'s `state.current` a string, its `comment.job` a string;
- 23.02+ (v0.0.39 and later): states are lists of flags, times, limits and priorities are
  `{"set": bool, "infinite": bool, "number": int}`, and `sinfo --json` (23.11+) groups nodes
  under `"sinfo": [{"nodes": {"nodes": [names]}, "gres": {"total": "gpu:8"}}]`.

Anything not recognised is bad input: an InputError naming the job and the field, so that a
command stops with one line before it writes or applies anything.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from allocator.core.errors import InputError

META_PREFIX = "gpuplan:"


@dataclass(frozen=True)
class QueueJob:
    """One job from `squeue --json`: what the snapshot and apply need of it."""

    id: str
    name: str
    user: str
    state: str  # PENDING, RUNNING, ... (the base state, flags dropped)
    reason: str
    gpus: int  # GPUs per node times nodes
    time_limit_minutes: int | None  # None: unlimited
    priority: int
    submit_time: int
    start_time: int
    eligible_time: int
    nodes: tuple[str, ...]  # allocated nodes (running)
    required_nodes: tuple[str, ...]
    gpu_index: dict[str, tuple[int, ...]]  # node -> GPU indices it holds (running)
    comment: str
    admin_comment: str
    reservation: str

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and (self.priority == 0
                                            or self.reason.startswith("JobHeld"))


@dataclass(frozen=True)
class Node:
    name: str
    gpus: int
    state: str


@dataclass(frozen=True)
class AcctJob:
    """One finished (or not) job from `sacct`: enough to become a history row."""

    id: str
    name: str
    state: str
    gpus: int | None  # None: no GPU in tres.allocated
    elapsed_seconds: int
    submit_time: pd.Timestamp | None
    comment: str
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- value helpers


def _number(value: Any, where: str, job: str | None = None, *, allow_none: bool = False
            ) -> int | None:
    """A plain integer (22.05) or a {set, infinite, number} struct (23+); None when unset or
    infinite."""
    if isinstance(value, dict):
        if "number" not in value and "set" not in value:
            raise InputError("expected an integer or {set, infinite, number}", job=job,
                             field=where)
        if value.get("infinite") or value.get("set") is False:
            return None
        value = value.get("number")
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise InputError(f"expected an integer, got {value!r}", job=job, field=where)
    return int(value)


def _state(value: Any, where: str, job: str | None) -> str:
    """`"RUNNING"` (22.05) or `["RUNNING", "COMPLETING"]` (23+): the base state."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value[0].upper()
    if isinstance(value, str) and value:
        return value.split()[0].upper()
    raise InputError(f"expected a job state, got {value!r}", job=job, field=where)


def _text(value: Any, where: str, job: str | None) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", job=job, field=where)
    return value


def expand_hostlist(text: str) -> tuple[str, ...]:
    """`node[01-03,07],gpu5` -> node01 node02 node03 node07 gpu5 (Slurm's hostlist syntax)."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text or ""):
        m = re.fullmatch(r"(.*?)\[([^\]]*)\](.*)", part)
        if not m:
            if part and part != "(null)":
                out.append(part)
            continue
        head, ranges, tail = m.groups()
        for rng in ranges.split(","):
            lo, _, hi = rng.partition("-")
            if hi:
                width = len(lo)
                out.extend(f"{head}{i:0{width}d}{tail}" for i in range(int(lo), int(hi) + 1))
            else:
                out.append(f"{head}{lo}{tail}")
    return tuple(out)


def _indices(text: str) -> tuple[int, ...]:
    """`0-1,4` -> (0, 1, 4)."""
    out: list[int] = []
    for rng in text.split(","):
        if not rng or rng == "N/A":
            continue
        lo, _, hi = rng.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


GPU_SPEC = re.compile(r"(?:gres[:/])?gpu(?::[\w.-]+)?[:=](\d+)")


def gpus_in(spec: str) -> int:
    """GPUs in a TRES/GRES string: `gres:gpu:2` (22.05), `gres/gpu:2` (23+), `gres/gpu=2`,
    `gpu:a100:4`; 0 when it names none."""
    total = 0
    for part in (spec or "").split(","):
        m = GPU_SPEC.fullmatch(part.strip().split("(")[0])
        if m:
            total += int(m.group(1))
    return total


def parse_meta(comment: str) -> dict[str, Any] | None:
    """The metadata convention: a comment `gpuplan:{json}`. None when the comment holds none;
    InputError (field `comment`) when it starts so but is not a JSON object."""
    text = (comment or "").strip()
    if not text.startswith(META_PREFIX):
        return None
    try:
        body = json.loads(text[len(META_PREFIX):],
                          parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as err:
        raise InputError(f"gpuplan metadata is not valid JSON: {err}", field="comment") from None
    if not isinstance(body, dict):
        raise InputError("gpuplan metadata must be a JSON object", field="comment")
    return body


def _load(text: str, what: str) -> dict:
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise InputError(f"{what} is not valid JSON: {err}") from None
    if not isinstance(doc, dict):
        raise InputError(f"{what}: expected a JSON object")
    errors = doc.get("errors") or []
    if errors:  # e.g. the controller did not answer: the lists beside it are empty, not true
        first = errors[0] if isinstance(errors[0], dict) else {"description": str(errors[0])}
        raise InputError(f"{what} reports an error: {first.get('description') or first}"
                         f" ({first.get('source', '?')})", field="errors")
    return doc


def _job_list(doc: dict, what: str) -> list[dict]:
    jobs = doc.get("jobs")
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        raise InputError(f"{what}: expected a list of job objects", field="jobs")
    return jobs


def _job_id(job: dict) -> str:
    value = job.get("job_id")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer job id, got {value!r}", field="job_id")
    return str(value)


# ---------------------------------------------------------------- squeue --json


def parse_squeue(text: str) -> list[QueueJob]:
    """`squeue --json` (22.05 or 23+) -> jobs, in Slurm's order."""
    doc = _load(text, "squeue output")
    out = []
    for job in _job_list(doc, "squeue output"):
        jid = _job_id(job)
        state = _state(job.get("job_state"), "job_state", jid)
        tres = _text(job.get("tres_per_node"), "tres_per_node", jid)
        per_job = _text(job.get("tres_per_job"), "tres_per_job", jid)
        node_count = _number(job.get("node_count", 1), "node_count", jid, allow_none=True) or 1
        gpus = gpus_in(tres) * node_count if tres else gpus_in(per_job)
        detail = job.get("gres_detail") or []
        if not isinstance(detail, list):
            raise InputError("expected a list of strings", job=jid, field="gres_detail")
        nodes = expand_hostlist(_text(job.get("nodes"), "nodes", jid)) \
            if state == "RUNNING" else ()
        gpu_index: dict[str, tuple[int, ...]] = {}
        for node, entry in zip(nodes, detail, strict=False):
            m = re.search(r"IDX:([0-9,\-]+|N/A)", str(entry))
            if m:
                gpu_index[node] = _indices(m.group(1))
        limit = _number(job.get("time_limit"), "time_limit", jid, allow_none=True)
        out.append(QueueJob(
            id=jid, name=_text(job.get("name"), "name", jid),
            user=_text(job.get("user_name"), "user_name", jid),
            state=state, reason=_text(job.get("state_reason"), "state_reason", jid),
            gpus=gpus, time_limit_minutes=limit,
            priority=_number(job.get("priority"), "priority", jid, allow_none=True) or 0,
            submit_time=_number(job.get("submit_time"), "submit_time", jid) or 0,
            start_time=_number(job.get("start_time"), "start_time", jid, allow_none=True) or 0,
            eligible_time=_number(job.get("eligible_time", 0), "eligible_time", jid,
                                  allow_none=True) or 0,
            nodes=nodes,
            required_nodes=expand_hostlist(_text(job.get("required_nodes"), "required_nodes",
                                                 jid)),
            gpu_index=gpu_index,
            comment=_text(job.get("comment"), "comment", jid),
            admin_comment=_text(job.get("admin_comment"), "admin_comment", jid),
            reservation=_text(job.get("resv_name"), "resv_name", jid)))
    return out


# ---------------------------------------------------------------- sinfo --json


def parse_sinfo(text: str) -> list[Node]:
    """`sinfo --json` -> nodes sorted by name (the order GPU g -> node g // 8 refers to).

    22.05/23.02: `{"nodes": [{"name", "gres": "gpu:8", "state"}]}`; 23.11+: `{"sinfo":
    [{"nodes": {"nodes": [names]}, "gres": {"total": "gpu:8"}, "node": {"state": [...]}}]}`.
    """
    doc = _load(text, "sinfo output")
    found: dict[str, Node] = {}
    if isinstance(doc.get("nodes"), list):
        for entry in doc["nodes"]:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise InputError("every node needs a string name", field="nodes.name")
            name = entry["name"]
            gres = _text(entry.get("gres"), "gres", name)
            found[name] = Node(name, gpus_in(gres), _state(entry.get("state"), "state", name))
    elif isinstance(doc.get("sinfo"), list):
        for entry in doc["sinfo"]:
            names = (entry.get("nodes") or {}).get("nodes") if isinstance(entry, dict) else None
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise InputError("expected a list of node names", field="sinfo.nodes.nodes")
            gres_doc = entry.get("gres") or {}
            total = gres_doc.get("total") if isinstance(gres_doc, dict) else None
            if total is not None and not isinstance(total, str):
                raise InputError("expected a GRES string", field="sinfo.gres.total")
            state = _state((entry.get("node") or {}).get("state") or ["UNKNOWN"],
                           "sinfo.node.state", None)
            for name in names:
                found[name] = Node(name, gpus_in(total or ""), state)
    else:
        raise InputError("sinfo output: expected `nodes` (22.05) or `sinfo` (23.11+)",
                         field="nodes")
    return [found[n] for n in sorted(found)]


# ---------------------------------------------------------------- sacct


def _gpus_from_tres(tres: Any, jid: str) -> int | None:
    """GPUs from `tres.allocated` ([{type: gres, name: gpu, count}]); None when none."""
    if not isinstance(tres, dict) or not isinstance(tres.get("allocated", []), list):
        raise InputError("expected {allocated: [...]}", job=jid, field="tres.allocated")
    count = 0
    for item in tres.get("allocated") or []:
        if not isinstance(item, dict):
            raise InputError("expected TRES objects", job=jid, field="tres.allocated")
        if item.get("type") == "gres" and str(item.get("name", "")).split(":")[0] == "gpu":
            count += _number(item.get("count"), "tres.allocated.count", jid) or 0
    return count or None


def _stamp(seconds: int | None) -> pd.Timestamp | None:
    return pd.Timestamp(seconds, unit="s", tz="UTC") if seconds else None


def parse_sacct_json(text: str) -> list[AcctJob]:
    """`sacct --json` (dbv0.0.38 or 23+): allocations only (steps are not jobs)."""
    doc = _load(text, "sacct output")
    out = []
    for job in _job_list(doc, "sacct output"):
        jid = _job_id(job)
        state = job.get("state")
        if not isinstance(state, dict):
            raise InputError("expected {current, reason}", job=jid, field="state")
        times = job.get("time")
        if not isinstance(times, dict):
            raise InputError("expected an object", job=jid, field="time")
        comment = job.get("comment")
        if isinstance(comment, dict):
            comment = comment.get("job")
        out.append(AcctJob(
            id=jid, name=_text(job.get("name"), "name", jid),
            state=_state(state.get("current"), "state.current", jid),
            gpus=_gpus_from_tres(job.get("tres"), jid),
            elapsed_seconds=_number(times.get("elapsed"), "time.elapsed", jid) or 0,
            submit_time=_stamp(_number(times.get("submission"), "time.submission", jid,
                                       allow_none=True)),
            comment=_text(comment, "comment.job", jid)))
    return out


SACCT_FIELDS = ("JobID", "JobName", "State", "ElapsedRaw", "AllocTRES", "Submit", "Comment")
SACCT_FORMAT = ",".join(SACCT_FIELDS)


def parse_sacct_text(text: str) -> list[AcctJob]:
    """`sacct -X -P --format=JobID,JobName,State,ElapsedRaw,AllocTRES,Submit,Comment` (a
    header line, `|`-separated): for sites whose Slurm has no JSON. The comment is the last
    column, so a `|` inside it survives."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    header = lines[0].split("|")
    missing = [f for f in SACCT_FIELDS if f not in header]
    if missing:
        raise InputError(f"sacct -P output lacks the column (use --format={SACCT_FORMAT})",
                         field=missing[0])
    idx = {name: header.index(name) for name in header}
    out = []
    for line in lines[1:]:
        cells = line.split("|", len(header) - 1)
        if len(cells) != len(header):
            raise InputError(f"expected {len(header)} columns: {line!r}", field="JobID")
        jid = cells[idx["JobID"]]
        if "." in jid:
            continue  # a step (batch, extern), not an allocation
        elapsed = cells[idx["ElapsedRaw"]]
        if not elapsed.isdigit():
            raise InputError(f"expected whole seconds, got {elapsed!r}", job=jid,
                             field="ElapsedRaw")
        submit = cells[idx["Submit"]]
        try:
            stamp = pd.Timestamp(submit, tz="UTC") if submit not in ("", "Unknown") else None
        except ValueError:
            raise InputError(f"not a time: {submit!r}", job=jid, field="Submit") from None
        out.append(AcctJob(
            id=jid, name=cells[idx["JobName"]],
            state=_state(cells[idx["State"]], "State", jid),
            gpus=gpus_in(cells[idx["AllocTRES"]]) or None,
            elapsed_seconds=int(elapsed), submit_time=stamp,
            comment=cells[idx["Comment"]]))
    return out


def parse_sacct(text: str) -> list[AcctJob]:
    """JSON when it looks like JSON, else the `-P` text form."""
    return parse_sacct_json(text) if text.lstrip().startswith("{") else parse_sacct_text(text)


def parse_reservations(text: str) -> dict[str, dict[str, str]]:
    """`scontrol -o show reservation` (one `Key=Value ...` line each; 22.05 has no JSON)."""
    out = {}
    for line in text.splitlines():
        pairs = dict(re.findall(r"(\w+)=(\S*)", line))
        if "ReservationName" in pairs:
            out[pairs["ReservationName"]] = pairs
    return out
