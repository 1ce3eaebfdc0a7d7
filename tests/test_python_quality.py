"""The Python client stays typed and lint-clean: `mypy --strict` and
`ruff check` over python_client/, the benchmark driver and the demo must
report nothing (their configuration is in python_client/pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# A check of the repository's files alone: no server version changes it.
pytestmark = pytest.mark.once

CLIENT = Path(__file__).resolve().parent.parent / "python_client"
# Beside the client, relative to it: programs that use it.
PROGRAMS = ("../bench/run.py", "../bench/cpu.py", "../bench/instructions.py",
            "../bench/long_runs.py", "../bench/metrics_scrape.py", "../bench/waiting.py",
            "../bench/agents.py", "../tests/failover.py",
            "../demo/demo.py", "../demo/demo_handlers.py", "../examples/chat/app.py")


def check(*command: str) -> None:
    proc = subprocess.run([sys.executable, "-m", *command], cwd=CLIENT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, f"{' '.join(command)} found problems:\n{proc.stdout}{proc.stderr}"


def test_mypy_strict() -> None:
    check("mypy", "--strict", "src", *PROGRAMS)


def test_ruff() -> None:
    check("ruff", "check", ".", *PROGRAMS)
