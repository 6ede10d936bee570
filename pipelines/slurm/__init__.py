"""gpuplan above Slurm: history from `sacct`, queue and cluster from `squeue`/`sinfo`, and the
committed hour applied back with `scontrol` (see docs/slurm.md)."""
