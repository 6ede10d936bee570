"""The `gpuplan` command: a thin shell over the command modules.

Each module in COMMAND_MODULES defines `register(app)`, adding its own commands,
so that each area (allocator, estimators, profile, pipelines) owns its CLI code.
"""

from __future__ import annotations

import importlib

import typer

COMMAND_MODULES = (
    "pipelines.commands_allocator",
    "pipelines.commands_simulate",
    "pipelines.commands_profile",
    "pipelines.commands_day",
    "pipelines.commands_forecast",
    "pipelines.commands_figures",
)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="gpuplan",
        help="Decide which GPU runs which job, hour by hour.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app


def main() -> None:
    build_app()()


if __name__ == "__main__":
    main()
