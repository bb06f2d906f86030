"""Install weight: a fresh venv with the runtime dependencies only (`pip install .`)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from live import ROOT
from stats import row


def _size_mb(path: Path) -> float:
    return (
        sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6
    )


def measure() -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="numi-install-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
        subprocess.run(
            [*pip, "install", str(ROOT)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        listed = subprocess.run(
            [*pip[:-1], "list", "--format=freeze"], check=True, capture_output=True, text=True
        ).stdout
        dists = [line for line in listed.splitlines() if line.strip()]
        size = _size_mb(venv)
    return [
        row("install", "venv size", [size], "MB", "≤ 200 MB"),
        row(
            "install",
            "distributions",
            [len(dists)],
            "",
            "≤ 50",
            note="pip, setuptools and numi included",
        ),
    ]
