"""MODEL.md's exact model as a MILP, and how `full` solves it.

- `model`: the PuLP problem (`MilpModel`, `build_model`) and its maps to and from grids.
- `solvers`: HiGHS and CBC behind `run_solver`, which never raises.
- `bounds`: the LP, block-capacity and zone relaxations, proven ceilings on every plan.
- `search`: the incumbent, the relaxation's starts placed with no-good cuts, windows
  (large neighbourhood search) and the whole MILP, as the steps `FullSolve` runs.

Imports point one way: model and solvers <- bounds <- search <- allocator.policies.full.
Importing this package does not import PuLP; its modules do.
"""
