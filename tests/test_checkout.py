"""benchmarks/ ships with the checkout only: the commands that run it say so in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from allocator.core.errors import InputError
from pipelines import checkout
from pipelines.cli import build_app

ROOT = Path(__file__).resolve().parents[1]


def test_the_installed_packages_leave_benchmarks_out():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert not any(pattern.startswith("benchmarks") or pattern == "*" for pattern in include)


def test_a_checkout_module_loads_from_the_checkout():
    module = checkout.benchmarks("bench_scale")
    assert Path(module.__file__).resolve().parent == ROOT / "benchmarks"


def test_without_the_checkout_the_loader_names_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(checkout, "ROOT", tmp_path)
    with pytest.raises(InputError, match="ships with the source checkout"):
        checkout.benchmarks("bench")


@pytest.mark.parametrize("args", [["bench", "--no-png"], ["bench-compare"],
                                  ["profile-eval", "--bench"], ["profile-clients"],
                                  ["figures", "--check", "--quick"]])
def test_without_the_checkout_each_command_exits_2_with_one_line(monkeypatch, tmp_path, args):
    monkeypatch.setattr(checkout, "ROOT", tmp_path)
    result = CliRunner().invoke(build_app(args[0]), args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "ships with the source checkout" in lines[0], result.output


SCRIPTS = ("full_mode", "quality", "optima", "estimator_tables", "fast_latency",
           "fast_instructions", "plan_wall",
           "speed_targets", "real_runs")


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_benchmark_script_answers_help_through_typer(script):
    """One CLI framework: every entry point of benchmarks/ is a typer command."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), "--help"],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout and "--help" in done.stdout
    assert "argparse" not in (ROOT / "benchmarks" / f"{script}.py").read_text()
