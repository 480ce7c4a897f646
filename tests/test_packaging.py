"""The project's own files agree with each other: environment.yml lists exactly the
pyproject dependencies and extras, and CI runs the README's test command."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name_spec(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = dict(_name_spec(r) for r in project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted.update(_name_spec(r) for r in extra)
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = dict(_name_spec(d) for d in env["dependencies"]
                 if isinstance(d, str) and not d.startswith(("python", "pip")))
    # packages only PyPI has come through the environment's pip section
    pip = [d for section in env["dependencies"] if isinstance(section, dict) for d in section.get("pip", [])]
    conda.update(_name_spec(d) for d in pip if not d.startswith("-e"))
    assert conda == wanted


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = [line.strip() for line in readme.splitlines() if line.strip().startswith("python3 -m venv")]
    assert len(commands) == 2, "the README gives exactly two commands (main job, tests)"
    test_command = next(c for c in commands if c.endswith("pytest"))
    assert test_command in (ROOT / ".ci" / "run").read_text()
