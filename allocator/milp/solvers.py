"""The solver adapters: HiGHS (through highspy, with a real warm start, an objective target
and the dual bound) and PuLP's bundled CBC (its bound read from the log), behind one
`run_solver` that never raises: a failed call is a `Solve` with status "error: ...".
"""

from __future__ import annotations

import math
import os
import re
import sys
import tempfile
import time
import warnings as pywarnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pulp

SOLVERS = ("highs", "cbc")
# Objectives are compared with MODEL.md's tolerance for metrics.
REL_TOL = 1e-6


@dataclass
class Solve:
    """What one solver call gave back, in the model's own (maximisation) terms."""

    status: str  # optimal | time_limit | target | infeasible | no_solution | error
    has_solution: bool
    objective: float | None  # as the solver reports it (the MILP part, no fixed value)
    bound: float | None  # a proven upper bound on the MILP part, when the solver gives one
    seconds: float
    nodes: int = 0  # branch-and-bound nodes (HiGHS): effort that does not depend on load
    iterations: int = 0  # simplex iterations (HiGHS), likewise


def solver_available(name: str) -> bool:
    if name == "highs":
        return bool(pulp.HiGHS(msg=False).available())
    if name == "cbc":
        return bool(_cbc(msg=False).available())
    return False


def _cbc(**kwargs: Any) -> pulp.LpSolver:
    """PuLP 3's bundled CBC (deprecated for PuLP 4, which pyproject excludes)."""
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(**kwargs)


class _HiGHS(pulp.HiGHS):  # type: ignore[misc]  # PuLP has no types: its HiGHS is Any
    """pulp.HiGHS with a real warm start (setSolution), an objective target and the bound.

    PuLP 3.3's HiGHS interface ignores warmStart; highspy takes a start directly.
    """

    def __init__(self, start: dict[str, float] | None = None, target: float | None = None,
                 options: dict[str, Any] | None = None, cutoff: float | None = None,
                 interrupt: Interrupt | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start = start
        self.target = target
        self.cutoff = cutoff
        self.interrupt = interrupt
        self.options = options or {}
        self.result: Solve | None = None

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
        _quiet_banner()
        super().createAndConfigureSolver(lp)

    def actualSolve(self, lp: pulp.LpProblem) -> int:  # PuLP names it so
        import highspy

        began = time.perf_counter()
        self.createAndConfigureSolver(lp)
        self.buildSolverModel(lp)
        h = lp.solverModel
        variables = lp.variables()
        for key, option in self.options.items():
            h.setOptionValue(key, option)
        if self.start is not None:
            index = np.array([v.index for v in variables], dtype=np.int32)
            value = np.array([self.start.get(v.name, 0.0) for v in variables], dtype=np.float64)
            h.setSolution(len(index), index, value)
        if self.timeLimit is not None:  # the limit covers building the model too
            spent = time.perf_counter() - began
            h.setOptionValue("time_limit", max(float(self.timeLimit) - spent, 0.01))
        if self.target is not None:  # stop as soon as an incumbent reaches the target
            h.setOptionValue("objective_target", -self.target)  # HiGHS minimises -objective
        if self.cutoff is not None:  # look only for solutions at least this good
            h.setOptionValue("objective_bound", -self.cutoff)
        if self.interrupt is not None:
            self._watch(h, lp.sense == pulp.LpMaximize)
        try:
            self.callSolver(lp)
        finally:
            if self.interrupt is not None:
                h.stopCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)
        status = h.getModelStatus()
        info = h.getInfo()
        has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
        if has_solution:
            col = h.getSolution().col_value
            for v in variables:
                v.varValue = col[v.index]
        names = {
            highspy.HighsModelStatus.kOptimal: "optimal",
            highspy.HighsModelStatus.kTimeLimit: "time_limit",
            highspy.HighsModelStatus.kObjectiveTarget: "target",
            highspy.HighsModelStatus.kInfeasible: "infeasible",
            highspy.HighsModelStatus.kInterrupt: "interrupted",
        }
        name = names.get(status, h.modelStatusToString(status))
        sense = -1.0 if lp.sense == pulp.LpMaximize else 1.0
        objective = sense * info.objective_function_value if has_solution else None
        if self.mip:
            bound = sense * info.mip_dual_bound
            bound = bound if math.isfinite(bound) else None
        else:
            bound = objective if name == "optimal" else None
        self.result = Solve(name, has_solution, objective, bound, time.perf_counter() - began,
                            nodes=max(int(info.mip_node_count), 0) if self.mip else 0,
                            iterations=max(int(info.simplex_iteration_count), 0))
        lp.assignStatus(pulp.LpStatusOptimal if has_solution else pulp.LpStatusNotSolved)
        return int(lp.status)

    def _watch(self, h: Any, maximise: bool) -> None:
        """Ask `interrupt` (seconds into the solve, the dual bound in the model's own
        terms) at HiGHS's MIP interrupt points; stop the solve when it says so."""
        import highspy

        interrupt, sense = self.interrupt, -1.0 if maximise else 1.0
        assert interrupt is not None

        def check(_kind: int, _message: str, out: Any, into: Any, _data: object) -> None:
            bound = sense * out.mip_dual_bound
            if math.isfinite(bound) and interrupt(out.running_time, bound):
                into.user_interrupt = True

        h.setCallback(check, None)
        h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)


# (seconds into the solve, dual bound) -> stop now? For a HiGHS MIP solve (solve_highs).
Interrupt = Callable[[float, float], bool]

_BANNER = {"quiet": False}


def _quiet_banner() -> None:
    """HiGHS prints a banner on stdout when a process makes its first solver, whatever
    output_flag says; swallow it once, so a CLI's stdout stays the CLI's."""
    if _BANNER["quiet"]:
        return
    _BANNER["quiet"] = True
    import highspy

    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no usable stdout: nothing to keep clean
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()  # type: ignore[no-untyped-call]  # highspy's __init__ is unannotated
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def solve_highs(prob: pulp.LpProblem, *, time_limit: float, mip_gap: float = 1e-4,
                start: dict[str, float] | None = None, target: float | None = None,
                mip: bool = True, options: dict[str, Any] | None = None,
                cutoff: float | None = None, interrupt: Interrupt | None = None) -> Solve:
    """One HiGHS solve. With `cutoff`, only solutions worth at least it are sought, and
    "infeasible" means none exists: every solution is worth less. With `interrupt`, the
    solve stops early when it says so (status "interrupted"; the dual bound still holds)."""
    solver = _HiGHS(start=start, target=target, options=options, cutoff=cutoff, mip=mip,
                    interrupt=interrupt, msg=False,
                    timeLimit=max(time_limit, 0.0), gapRel=mip_gap)
    began = time.perf_counter()
    try:
        prob.solve(solver)
    except Exception as err:  # a solver failure must never crash a plan
        return Solve(f"error: {err}", False, None, None, time.perf_counter() - began)
    assert solver.result is not None
    return solver.result


_CBC_BOUND = re.compile(r"best possible (-?[\d.e+]+)")


def solve_cbc(prob: pulp.LpProblem, *, time_limit: float, mip_gap: float = 1e-4,
              start: dict[str, float] | None = None) -> Solve:
    """PuLP's bundled CBC; its bound is read from the log (PuLP does not expose it)."""
    if start is not None:
        for v in prob.variables():
            v.setInitialValue(start.get(v.name, 0.0))
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "cbc.log"
        solver = _cbc(msg=False, timeLimit=max(math.ceil(time_limit), 1),
                      gapRel=mip_gap, warmStart=start is not None,
                      logPath=str(log))
        try:
            prob.solve(solver)
        except Exception as err:  # a solver failure must never crash a plan
            return Solve(f"error: {err}", False, None, None, time.perf_counter() - began)
        text = log.read_text(errors="replace") if log.exists() else ""
    seconds = time.perf_counter() - began
    has_solution = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    objective = pulp.value(prob.objective) if has_solution else None
    objective = float(objective) if objective is not None else 0.0 if has_solution else None
    if prob.status == pulp.LpStatusOptimal and prob.sol_status == pulp.LpSolutionOptimal:
        return Solve("optimal", True, objective, objective, seconds)
    if prob.status == pulp.LpStatusInfeasible:
        return Solve("infeasible", False, None, None, seconds)
    found = _CBC_BOUND.findall(text)
    # CBC minimises -objective for a maximisation, so its "best possible" is negated.
    bound = -float(found[-1]) if found else None
    return Solve("time_limit", has_solution, objective, bound, seconds)


def run_solver(name: str, prob: pulp.LpProblem, *, time_limit: float, mip_gap: float,
               start: dict[str, float] | None, target: float | None,
               cutoff: float | None = None, options: dict[str, Any] | None = None,
               interrupt: Interrupt | None = None) -> Solve:
    """`cutoff`, `options` and `interrupt` (HiGHS only; CBC ignores them): see
    solve_highs."""
    if name == "highs":
        return solve_highs(prob, time_limit=time_limit, mip_gap=mip_gap, start=start,
                           target=target, cutoff=cutoff, options=options,
                           interrupt=interrupt)
    return solve_cbc(prob, time_limit=time_limit, mip_gap=mip_gap, start=start)


def relative_gap(objective: float, bound: float | None) -> float | None:
    """(bound - objective) / max(|bound|, |objective|), 0 when they agree to 1e-6."""
    if bound is None:
        return None
    scale = max(abs(bound), abs(objective), 1.0)
    diff = bound - objective
    return 0.0 if diff <= REL_TOL * scale else diff / scale
