"""The hot path imports only what it needs, and one broken command module breaks no other."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import typer

from pipelines import cli

HEAVY = ("pulp", "highspy", "pandas", "matplotlib", "mlflow", "sklearn", "lightgbm",
         "statsmodels", "pydantic")


def _loaded_after(code: str) -> list[str]:
    """Run `code` in a fresh interpreter; the heavy modules it left in sys.modules."""
    probe = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("policy", ["fast", "fifo", "priority"])
def test_plan_command_path_loads_no_heavy_module(policy, tmp_path):
    """`gpuplan plan --policy P` run in-process, end to end: no solver, pandas or MLflow."""
    out = tmp_path / "plan.json"
    loaded = _loaded_after(f"""
        from typer.testing import CliRunner
        from pipelines.cli import build_app
        result = CliRunner().invoke(build_app("plan"), [
            "plan", "data/scenarios/mixed-control.json", "--policy", "{policy}",
            "--out", r"{out}"])
        assert result.exit_code == 0, result.output
    """)
    assert loaded == []
    assert json.loads(out.read_text())["policy"] == policy


def test_full_policy_still_resolves_lazily():
    from allocator import policies

    assert "full" in policies.POLICIES
    assert _loaded_after("""
        from allocator import policies
        assert callable(policies.get("full"))
    """)[:2] == ["pulp", "highspy"]


def test_command_table_names_the_module_that_registers_each_command():
    """COMMANDS must match what the modules register, or `gpuplan X` would load the wrong one."""
    app = cli.build_app()
    registered = {c.name: c.callback.__module__ for c in app.registered_commands}
    assert registered, "no commands registered"
    for name, module in registered.items():
        assert cli.COMMANDS.get(name) == module, name


def test_one_broken_module_leaves_the_other_commands(monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMAND_MODULES",
                        ("pipelines.no_such_commands", *cli.COMMAND_MODULES))
    app = cli.build_app()
    names = {c.name for c in app.registered_commands}
    assert "plan" in names and "simulate" in names
    assert "pipelines.no_such_commands" in capsys.readouterr().err


def test_a_known_command_loads_only_its_module(monkeypatch):
    monkeypatch.setitem(cli.COMMANDS, "plan", "pipelines.commands_allocator")
    app = cli.build_app("plan")
    names = {c.name for c in app.registered_commands}
    assert "plan" in names and "simulate" not in names
    assert isinstance(app, typer.Typer)


def test_command_name_skips_options():
    assert cli._command_name(["--help"]) is None
    assert cli._command_name(["plan", "x.json"]) == "plan"
