"""The daily report an operator reads: what to do now first, then the day, in plain words.

Everything here is recomputed from the scenario and the grids, never from a policy's own
bookkeeping, so the report tells the truth about whichever plan it is given.
"""

from __future__ import annotations

import html as htmllib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from allocator.core.markdown import table
from allocator.explain import holders
from allocator.model import BatchJob, RealtimeJob, Scenario
from allocator.plan import Plan

MAX_WINDOWS = 15

# A step's wall-clock label in the report ("Mon 09:00"), optionally in another format.
Clock = Callable[..., str]


@dataclass(frozen=True)
class Window:
    """An aligned block of `size` free GPUs from step `start` to `end` (exclusive)."""

    size: int
    first_gpu: int
    start: int
    end: int


# ---------------------------------------------------------------- facts from a grid


def held(plan: Plan) -> dict[str, np.ndarray]:
    """GPUs each realtime service holds at each step."""
    s = plan.scenario
    return {job.id: (plan.grid == i).sum(axis=1) for i, job in enumerate(s.jobs)
            if isinstance(job, RealtimeJob)}


def free_blocks(free: np.ndarray, size: int) -> np.ndarray:
    """(T, G // size) booleans: is the aligned block [b*size, (b+1)*size) free at t."""
    T, G = free.shape
    n = G // size
    return np.all(free[:, : n * size].reshape(T, n, size), axis=2)


def sizes(G: int) -> list[int]:
    out, k = [], 1
    while k <= G:
        out.append(k)
        k *= 2
    return out


def largest_free_block(plan: Plan) -> list[int]:
    free = plan.grid < 0
    out = [0] * plan.scenario.T
    for k in sizes(plan.scenario.G):
        fb = free_blocks(free, k).any(axis=1)
        for t in np.nonzero(fb)[0]:
            out[t] = k
    return out


def idle_windows(plan: Plan) -> list[Window]:
    """Maximal free aligned blocks over time, biggest first; a window inside a larger one
    (more GPUs over at least the same hours) is left out."""
    free = plan.grid < 0
    found: list[Window] = []
    for k in reversed(sizes(plan.scenario.G)):
        fb = free_blocks(free, k)
        for b in range(fb.shape[1]):
            col = np.concatenate([[False], fb[:, b], [False]])
            edges = np.flatnonzero(np.diff(col.astype(np.int8)))
            for s, e in zip(edges[::2], edges[1::2], strict=True):
                w = Window(k, b * k, int(s), int(e))
                if not any(o.first_gpu <= w.first_gpu and w.first_gpu + k <= o.first_gpu + o.size
                           and o.start <= w.start and w.end <= o.end for o in found):
                    found.append(w)
    found.sort(key=lambda w: (-w.size * (w.end - w.start), w.start, w.first_gpu))
    return found


def _longest_run(free: np.ndarray) -> int:
    """The most consecutive True steps in any column of a (T, blocks) array."""
    best = 0
    for col in free.T:
        run = 0
        for ok in col:
            run = run + 1 if ok else 0
            best = max(best, run)
    return best


def why_unplaced(scenario: Scenario, grid: np.ndarray, job: BatchJob,
                 clock: Clock = str) -> str:
    """Plain words for a job the plan leaves out, judged against the final grid."""
    T = scenario.T
    after = "after it arrives"
    if job.arrival_step:
        after += f" ({clock(job.arrival_step)})"
    if job.arrival_step >= T:
        return "it arrives after the end of this plan"
    free = free_blocks(grid < 0, job.gpus)[job.arrival_step:]
    for s in range(free.shape[0]):
        need = min(job.duration_steps, free.shape[0] - s)
        if free[s: s + need].all(axis=0).any():
            return (f"a {job.gpus}-GPU block is free from {clock(s + job.arrival_step)}, but "
                    "the planner kept it for more valuable work")
    best = _longest_run(free)
    if best == 0:
        block = "GPU" if job.gpus == 1 else f"aligned block of {job.gpus} GPUs"
        return (f"no {block} is free at any step {after}; "
                "higher-priority work and realtime serving hold the cluster")
    return (f"the longest free aligned {job.gpus}-GPU window {after} lasts {best} step(s) "
            f"and it needs {job.duration_steps}")


def waits(plan: Plan, ids: list[str]) -> list[int]:
    """Steps each started batch job of `ids` waits after its arrival."""
    starts = plan.starts()
    batch = {job.id: job for job in plan.scenario.batch_jobs}
    return [starts[j]["start"] - batch[j].arrival_step for j in ids if j in starts]


# ---------------------------------------------------------------- words


def gpu_range(first: int, count: int, node_size: int) -> str:
    last = first + count - 1
    nodes = sorted({first // node_size, last // node_size})
    where = f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {nodes[0]}-{nodes[-1]}"
    gpus = f"GPU {first}" if count == 1 else f"GPUs {first}-{last}"
    return f"{gpus} ({where})"


def gpu_list(gpus: list[int]) -> str:
    """Compact ranges: [0, 1, 2, 5] -> '0-2, 5'."""
    if not gpus:
        return "none"
    gpus = sorted(gpus)
    parts, lo, prev = [], gpus[0], gpus[0]
    for g in [*gpus[1:], None]:
        if g is not None and g == prev + 1:
            prev = g
            continue
        parts.append(f"{lo}" if lo == prev else f"{lo}-{prev}")
        if g is not None:
            lo = prev = g
    return ", ".join(parts)


def hours(steps: int, step_minutes: int) -> str:
    h = steps * step_minutes / 60
    return f"{h:g} h"


def _table(head: list[str], rows: list[list[object]]) -> str:
    return table(head, rows).removesuffix("\n")  # the report joins its parts with newlines


@dataclass
class Report:
    title: str
    markdown_text: str

    def markdown(self) -> str:
        return self.markdown_text

    def html(self) -> str:
        from markdown_it import MarkdownIt

        body = MarkdownIt("commonmark").enable("table").render(self.markdown_text)
        return (
            "<!doctype html>\n<html><head><meta charset='utf-8'>"
            f"<title>{htmllib.escape(self.title)}</title><style>"
            "body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;"
            "padding:0 1rem;line-height:1.45}table{border-collapse:collapse;font-size:.9rem}"
            "td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left}"
            "th{background:#f3f3f3}img{max-width:100%}code{background:#f3f3f3}"
            f"</style></head><body>\n{body}</body></html>\n")


# ---------------------------------------------------------------- the report


def build(plans, picture: str = "grid.png", tracking_note: str = "") -> Report:
    """The report for a DayPlans (pipelines.plan_day): the committed first step first."""
    day, plan = plans.day, plans.plan
    s = day.scenario
    step = s.cluster.step_minutes

    def clock(t: int, fmt: str = "%a %H:%M") -> str:
        return day.time(t).strftime(fmt)

    title = (f"GPU plan from {day.start.strftime('%a %d %b %Y %H:%M')} UTC, "
             f"{hours(s.T, step)} in {s.T} steps")
    starts = plan.starts()
    kinds_rt = held(plan)
    rt_jobs = s.realtime_jobs
    free_now = int((plan.grid[0] < 0).sum()) if s.T else 0
    lines = [f"# {title}", ""]
    nodes = (s.G + s.cluster.node_size - 1) // s.cluster.node_size
    lines += [
        f"Cluster of {s.G} GPUs in {nodes} node(s) of {s.cluster.node_size}, steps of "
        f"{step} minutes. Plan made by the **{plan.policy}** policy in "
        f"{plan.latency_ms:.1f} ms; {len(day.queued) + len(day.rejected)} queued job(s), "
        f"{len(day.running)} running, {len(rt_jobs)} realtime service(s).", ""]
    proven = plan.extras.get("bound") or {}
    if proven.get("value") is not None:
        lines += [f"Proven: {proven['summary']} (upper bound {proven['value']:.2f} on the "
                  f"objective, {proven['method']} relaxation).", ""]
    solve = plan.solve  # the MILP's report (policy full)
    if solve is not None:
        gap = solve.gap
        lines += [f"MILP review: solver status *{solve.status}*"
                  + (f", gap to the proven bound {100 * gap:.2f}%" if gap is not None else "")
                  + f", {solve.solve_seconds:.1f} s.", ""]

    # -- 1. the committed first step
    lines += [f"## Do now: step 0, {clock(0)} to {clock(1, '%H:%M')}", ""]
    new = sorted((j for j in day.queued if j in starts and starts[j]["start"] == 0),
                 key=lambda j: starts[j]["first_gpu"])
    if new:
        lines.append("**Start these jobs now:**")
        lines.append("")
        for j in new:
            job = s.job(j)
            end = job.duration_steps
            lines.append(f"- **{j}** ({job.kind}, priority {job.priority:g}) on "
                         f"{gpu_range(starts[j]['first_gpu'], job.gpus, s.cluster.node_size)}"
                         f", expected to take {hours(job.duration_steps, step)}, until "
                         f"{clock(end)}.")
    else:
        lines.append("**No new job starts at this step.**")
        later = [j for j in day.queued if j in starts]
        if later:
            first = min(starts[j]["start"] for j in later)
            nxt = sorted((j for j in later if starts[j]["start"] == first),
                         key=lambda j: starts[j]["first_gpu"])
            lines.append("")
            lines.append(f"Next starts at {clock(first)}: " + "; ".join(
                f"{j} ({s.job(j).kind}) on "
                f"{gpu_range(starts[j]['first_gpu'], s.job(j).gpus, s.cluster.node_size)}"
                for j in nxt) + ".")
    lines.append("")
    keep = [j for j in day.running if j in starts]
    if keep:
        lines.append("**Keep running:**")
        lines.append("")
        for j in keep:
            job = s.job(j)
            lines.append(f"- {j} ({job.kind}) on "
                         f"{gpu_range(job.running.first_gpu, job.gpus, s.cluster.node_size)}"
                         f", {hours(job.running.remaining_steps, step)} left, until "
                         f"{clock(job.running.remaining_steps)}.")
        lines.append("")
    if rt_jobs:
        lines.append("**Realtime serving holds now:**")
        lines.append("")
        for job in rt_jobs:
            idx = s.jobs.index(job)
            gpus = [int(g) for g in np.nonzero(plan.grid[0] == idx)[0]] if s.T else []
            need = job.demand[0] if s.T else 0
            state = "covered" if len(gpus) >= need else f"**short by {need - len(gpus)}**"
            lines.append(f"- {job.id}: {len(gpus)} GPU(s) for a forecast need of {need} "
                         f"({state}), GPUs {gpu_list(gpus)}.")
        lines.append("")
    idle_now = [int(g) for g in np.nonzero(plan.grid[0] < 0)[0]] if s.T else []
    lines += [f"Idle at this step: {free_now} GPU(s)"
              + (f", GPUs {gpu_list(idle_now)}." if idle_now else "."), ""]

    # -- 2. the picture and the comparison
    lines += ["## The day at a glance", "",
              f"![the plan above, fifo below]({picture})", "",
              "Each row is a GPU, each column a step; hatched cells are realtime serving. "
              "Top: this plan. Bottom: first-come-first-served (fifo) with a fixed peak "
              "reservation for realtime, the usual way, on the same day.", ""]
    lines += _comparison(plans)

    # -- 3. hour by hour
    lines += ["## Hour by hour", ""]
    biggest = largest_free_block(plan)
    rows = []
    for t in range(s.T):
        rt_held = sum(int(v[t]) for v in kinds_rt.values())
        rt_need = sum(j.demand[t] for j in rt_jobs)
        batch = int(s.G - (plan.grid[t] < 0).sum()) - rt_held
        begin = [j for j in day.queued if j in starts and starts[j]["start"] == t]
        rows.append([clock(t), batch, f"{rt_held} ({rt_need})", int((plan.grid[t] < 0).sum()),
                     biggest[t] or "-", ", ".join(begin) or ""])
    lines += [_table(["time", "batch GPUs", "realtime held (need)", "free GPUs",
                      "largest free block", "jobs starting"], rows), ""]

    # -- 4. realtime coverage risk
    lines += _coverage(plan, clock)

    # -- 5. idle windows
    lines += _idle(plan, clock, step)

    # -- 6. expected starts, 7. not placed
    lines += _expected(plans, clock, step)
    lines += _promises(plans, clock)
    lines += _unplaced(plans, clock)

    # -- 8. provenance
    lines += ["## Where the numbers come from", ""]
    for key, value in sorted(day.sources.items()):
        lines.append(f"- {key}: {value}")
    if tracking_note:
        lines.append(f"- tracking: {tracking_note}")
    lines += ["- files: plan.json (the plan), scenario.json (its exact input), grid.csv "
              "(the grid, one row per step), grid.png (the picture).", ""]
    return Report(title=title, markdown_text="\n".join(lines))


def _comparison(plans) -> list[str]:
    plan, fifo, day = plans.plan, plans.fifo, plans.day
    step_h = day.scenario.cluster.step_minutes / 60
    pm, fm = plan.metrics, fifo.metrics

    def batch_hours(p: Plan) -> float:
        cells = sum(int((p.grid == i).sum()) for i, j in enumerate(p.scenario.jobs)
                    if isinstance(j, BatchJob))
        return cells * step_h

    def started(p: Plan) -> int:
        st = p.starts()
        return sum(1 for j in day.queued if j in st)

    def mean_wait(p: Plan) -> str:
        w = waits(p, day.queued)
        return f"{np.mean(w) * step_h:.1f} h" if w else "-"

    rows: list[list[object]] = [
        ["GPU utilization", f"{100 * pm.utilization:.1f}%", f"{100 * fm.utilization:.1f}%"],
        ["batch GPU-hours run", f"{batch_hours(plan):g}", f"{batch_hours(fifo):g}"],
        ["queued jobs started", started(plan), started(fifo)],
        ["jobs completed in the day", pm.completed, fm.completed],
        ["mean wait of started jobs", mean_wait(plan), mean_wait(fifo)],
        ["priority-weighted output (value)", f"{pm.value:g}", f"{fm.value:g}"],
        ["realtime shortfall, GPU-steps", pm.rt_shortfall, fm.rt_shortfall],
        ["objective", f"{pm.objective:.1f}", f"{fm.objective:.1f}"],
    ]
    verdict = (f"Against fifo on the same day: realtime shortfall {pm.rt_shortfall} GPU-steps "
               f"against {fm.rt_shortfall}, utilization {100 * pm.utilization:.1f}% against "
               f"{100 * fm.utilization:.1f}%, {batch_hours(plan):g} batch GPU-hours against "
               f"{batch_hours(fifo):g}, {started(plan)} queued jobs started against "
               f"{started(fifo)}, mean wait {mean_wait(plan)} against {mean_wait(fifo)}.")
    return ["## Compared with first-come-first-served", "", verdict, "",
            _table(["", f"this plan ({plan.policy})", "fifo"], rows), ""]


def _coverage(plan: Plan, clock: Clock) -> list[str]:
    s = plan.scenario
    rt = s.realtime_jobs
    if not rt:
        return ["## Realtime coverage risk", "", "No realtime service in this plan.", ""]
    h = held(plan)
    rows, short_steps, tight_steps = [], 0, 0
    for t in range(s.T):
        spare = int((plan.grid[t] < 0).sum())
        cells, short, room = [], 0, 0
        for job in rt:
            need, got = job.demand[t], int(h[job.id][t])
            cells.append(f"{got}/{need}")
            short += max(0, need - got)
            room += max(0, got - need)
        if short:
            risk = f"SHORT by {short}"
            short_steps += 1
        elif room + spare == 0:
            risk = "tight: only the services' headroom"
            tight_steps += 1
        else:
            risk = "ok"
        rows.append([clock(t), *cells, short, room, spare, risk])
    intro = ("Held/needed GPUs per service and step. The need is the upper-quantile traffic "
             "forecast converted to GPUs with each service's own headroom. *Shortfall* is "
             "planned under-provisioning; *headroom* is GPUs held above the need; *spare* "
             "are idle GPUs that could absorb a surprise. "
             + (f"**{short_steps} step(s) are planned short.** " if short_steps else
                "Every step's need is covered. ")
             + (f"{tight_steps} step(s) have no idle GPU beyond the services' own headroom."
                if tight_steps else "Every step also has idle GPUs to spare."))
    return ["## Realtime coverage risk", "", intro, "",
            _table(["time", *[f"{j.id} held/need" for j in rt], "shortfall", "headroom",
                    "spare", "risk"], rows), ""]


def _idle(plan: Plan, clock: Clock, step: int) -> list[str]:
    s = plan.scenario
    windows = idle_windows(plan)
    lines = ["## Idle windows", ""]
    if not windows:
        return [*lines, "No GPU is idle at any step.", ""]
    lines += ["Free aligned blocks (where a job of that many GPUs could run): good slots "
              "for ad-hoc work or maintenance. By size, then the largest windows first.", ""]
    free = plan.grid < 0
    rows = []
    for k in reversed(sizes(s.G)):
        fb = free_blocks(free, k)
        if fb.any():
            rows.append([f"{k} GPU(s)", int(fb.any(axis=1).sum()), int(fb.sum()),
                         hours(_longest_run(fb), step)])
    lines += [_table(["block size", "steps with one free", "block-steps free",
                      "longest window"], rows), ""]
    for w in windows[:MAX_WINDOWS]:
        until = "the end of the plan" if w.end >= s.T else clock(w.end)
        lines.append(f"- {gpu_range(w.first_gpu, w.size, s.cluster.node_size)}: free from "
                     f"{clock(w.start)} until {until} ({hours(w.end - w.start, step)}).")
    if len(windows) > MAX_WINDOWS:
        lines.append(f"- ... and {len(windows) - MAX_WINDOWS} smaller window(s).")
    lines.append("")
    return lines


def _promises(plans, clock: Clock) -> list[str]:
    """--guard: each promise by job, block and start, against the previous plan's."""
    day = plans.day
    if not day.promises and not day.warnings:
        return []
    node = day.scenario.cluster.node_size
    lines = ["## Promises (starvation guard)", "",
             "Blocks promised to waiting large jobs; the next plan keeps each or moves it "
             "earlier (give it this plan.json as --previous-plan).", ""]
    for p in day.promises:
        at = clock(p.start) if p.start < day.scenario.T else f"step {p.start}"
        was = ("new" if p.was is None else "kept" if p.was == p.start else
               f"{'earlier' if p.start < p.was else 'later'} than step {p.was}")
        lines.append(f"- **{p.id}** on {gpu_range(p.first_gpu, p.gpus, node)} from "
                     f"{at} (step {p.start}; {was}).")
    lines += [f"- dropped: {w}" for w in day.warnings]
    return [*lines, ""]


def _expected(plans, clock: Clock, step: int) -> list[str]:
    day, plan, fifo = plans.day, plans.plan, plans.fifo
    s = day.scenario
    starts, fstarts = plan.starts(), fifo.starts()
    placed = sorted((j for j in day.queued if j in starts),
                    key=lambda j: (starts[j]["start"], starts[j]["first_gpu"], j))
    rows = []
    for j in placed:
        job = s.job(j)
        st = starts[j]
        end = st["start"] + job.duration_steps
        fs = clock(fstarts[j]["start"]) if j in fstarts else "not today"
        rows.append([j, job.kind, f"{job.priority:g}", job.gpus,
                     hours(job.duration_steps, step), clock(st["start"]),
                     clock(end) + ("" if end <= s.T else " (after this plan)"),
                     gpu_range(st["first_gpu"], job.gpus, s.cluster.node_size), fs,
                     _waits_for(s, plan, job, st["start"], clock)])
    lines = ["## Expected start of every queued job", "",
             "Like `squeue --start`: when and where each queued job is planned to run, "
             "sorted by start. Estimates move as jobs finish early or late; the plan is "
             "remade every run.", ""]
    if rows:
        lines += [_table(["job", "kind", "priority", "GPUs", "expected length",
                          "expected start", "expected end", "where", "fifo would start",
                          "waits for"], rows), "",
                  "\"waits for\": the jobs holding the block of its size that frees first "
                  "(`gpuplan explain` adds the single change that would start it earlier).",
                  ""]
    else:
        lines += ["No queued job is placed in this plan.", ""]
    return lines


def _waits_for(s, plan, job, start: int, clock: Clock) -> str:
    """Who holds the block the job waits for, and until when (allocator.explain)."""
    if start <= job.arrival_step:
        return "-"
    index = next(i for i, j in enumerate(s.jobs) if j.id == job.id)
    held = holders(s, plan.grid, index, job, start)
    return ", ".join(f"{h.job} ({h.kind}) until {clock(h.until)}" for h in held) or "-"


def _unplaced(plans, clock: Clock) -> list[str]:
    day, plan = plans.day, plans.plan
    s = day.scenario
    starts = plan.starts()
    rows = []
    for j in day.queued:
        if j not in starts:
            job = s.job(j)
            rows.append([j, job.kind, job.gpus, why_unplaced(s, plan.grid, job, clock)])
    for r in day.rejected:
        rows.append([r.id, r.kind or "-", "-", r.reason])
    lines = ["## Not placed today", ""]
    if not rows:
        return [*lines, "Every queued job has a place in this plan.", ""]
    lines += [f"{len(rows)} job(s) wait beyond this plan. They stay queued; the next plan "
              "considers them again.", "",
              _table(["job", "kind", "GPUs", "why"], rows), ""]
    return lines
