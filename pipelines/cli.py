"""The `gpuplan` command: a thin shell over the command modules.

Each module in COMMAND_MODULES defines `register(app)`, adding its own commands,
so that each area (allocator, estimators, profile, pipelines) owns its CLI code.

Modules are imported lazily: `gpuplan plan ...` imports only the module that owns
`plan` (COMMANDS says which), so the hot path pays for none of pandas, MLflow or the
solver, and one module that fails to import takes down only its own commands. A
command missing from COMMANDS still works: every module is then loaded.
"""

from __future__ import annotations

import importlib
import sys

import typer

COMMAND_MODULES = (
    "pipelines.commands_allocator",
    "pipelines.commands_simulate",
    "pipelines.commands_starve",
    "pipelines.commands_explain",
    "pipelines.commands_profile",
    "pipelines.commands_day",
    "pipelines.commands_forecast",
    "pipelines.slurm.commands",
    "pipelines.commands_figures",
)

# Which module registers which command: the lookup that keeps a run to one import.
COMMANDS: dict[str, str] = {
    **dict.fromkeys(("plan", "check", "show", "scenarios", "bench", "bench-compare"),
                    "pipelines.commands_allocator"),
    "simulate": "pipelines.commands_simulate",
    "starvation": "pipelines.commands_starve",
    "explain": "pipelines.commands_explain",
    "slurm": "pipelines.slurm.commands",
    "figures": "pipelines.commands_figures",
    **dict.fromkeys(("profile", "profile-eval", "profile-servegen", "profile-clients"),
                    "pipelines.commands_profile"),
    **dict.fromkeys(("plan-day", "demo", "where"), "pipelines.commands_day"),
    **dict.fromkeys(("synth-history", "train", "score"), "pipelines.commands_forecast"),
}


def _root() -> None:
    """Decide which GPU runs which job, hour by hour."""


def build_app(command: str | None = None) -> typer.Typer:
    """The app with every command, or (given a known command name) with its module's only.

    When loading them all (help, or an unknown name), a module that fails to import is
    reported on stderr and skipped; the commands of the others still run.
    """
    app = typer.Typer(
        name="gpuplan",
        help="Decide which GPU runs which job, hour by hour.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)  # a command group even when one module registers one command
    if command in COMMANDS:
        importlib.import_module(COMMANDS[command]).register(app)
        return app
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception as err:  # any import failure: keep the other commands usable
            print(f"gpuplan: warning: commands of {name} unavailable: {err!r}",
                  file=sys.stderr)
            continue
        module.register(app)
    return app


def _command_name(argv: list[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    for word in argv:
        if not word.startswith("-"):
            return word
    return None


def main() -> None:
    from pipelines.cliutil import guarded

    guarded(lambda: build_app(_command_name(sys.argv[1:])))


if __name__ == "__main__":
    main()
