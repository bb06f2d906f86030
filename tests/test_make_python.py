"""`make run` checks the Python first and rebuilds a .venv made by another interpreter
(issue 24). The real Makefile; an old interpreter is a stand-in script (this machine may
have no Python older than 3.11), the others are real."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", *args],
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": ""},
        timeout=120,
    )


def test_an_old_python_is_refused_at_once_with_what_to_run(tmp_path):
    old = tmp_path / "python3.10"
    # Answers as Python 3.10 does: `--version`, and False for "at least 3.11?".
    old.write_text('#!/bin/sh\n[ "$1" = "--version" ] && echo "Python 3.10.12" && exit 0\nexit 1\n')
    old.chmod(0o755)
    venv = tmp_path / "venv"
    started = time.monotonic()
    result = _make("run", f"VENV={venv}", f"PYTHON={old}")
    assert time.monotonic() - started < 30, "before any download"
    assert result.returncode != 0
    assert "Numi needs Python 3.11 or newer" in result.stderr
    assert "Python 3.10.12" in result.stderr and "make run PYTHON=python3.12" in result.stderr
    assert not venv.exists(), "nothing made"
    assert "pip" not in result.stdout


def _base_python() -> str:
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _real_interpreter(command: str) -> str | None:
    """The interpreter a command runs in the end (a pyenv shim is a script, say)."""
    result = subprocess.run(
        [command, "-c", "import os, sys; print(os.path.realpath(sys._base_executable))"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def test_a_venv_of_this_python_is_kept(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([_base_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / ".installed").touch()
    dry = _make("-n", "run", f"VENV={venv}", f"PYTHON={_base_python()}")
    assert dry.returncode == 0, dry.stderr
    assert f"rm -rf {venv}" not in dry.stdout and "-m venv" not in dry.stdout
    assert f"{venv}/bin/numi serve" in dry.stdout


def test_a_venv_whose_python_is_gone_or_another_is_rebuilt(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([_base_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / ".installed").touch()
    others = {
        found
        for name in ("python3", "python3.11", "python3.12", "python3.13", "/usr/bin/python3")
        if (found := shutil.which(name)) and _real_interpreter(found) not in (None, _base_python())
    }
    for other in sorted(others):  # another interpreter on this machine, when there is one
        dry = _make("-n", "run", f"VENV={venv}", f"PYTHON={other}")
        assert f"rm -rf {venv}" in dry.stdout and f"{other} -m venv {venv}" in dry.stdout, dry
    # the interpreter it was made with is gone (or a first try with an old Python broke it)
    python = venv / "bin" / "python"
    python.unlink()
    python.symlink_to(tmp_path / "removed-python")
    dry = _make("-n", "run", f"VENV={venv}", f"PYTHON={_base_python()}")
    assert dry.returncode == 0, dry.stderr
    assert "was made by another Python" in dry.stdout and f"rm -rf {venv}" in dry.stdout
    assert f"-m venv {venv}" in dry.stdout and "install" in dry.stdout


def _venv_with_stand_ins(tmp_path, *, uv_exit: int | None) -> tuple[Path, Path]:
    """A venv whose python runs the real interpreter for `-c` (make's identity check) and
    records any other call, as `pip` does; its uv (none when `uv_exit` is None) records its
    arguments and exits with `uv_exit`. Returns (venv, the record)."""
    venv, record = tmp_path / "venv", tmp_path / "calls"
    subprocess.run([_base_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    python.unlink()
    python.write_text(
        f'#!/bin/sh\n[ "$1" = "-c" ] && exec {_base_python()} "$@"\necho "python $*" >> {record}\n'
    )
    python.chmod(0o755)
    if uv_exit is not None:
        uv = venv / "bin" / "uv"
        uv.write_text(f'#!/bin/sh\necho "uv $*" >> {record}\nexit {uv_exit}\n')
        uv.chmod(0o755)
    return venv, record


def test_the_install_goes_through_uv_and_falls_back_to_pip(tmp_path):
    for uv_exit, expected in (
        # uv in the venv installs; pip is not asked
        (0, ["uv pip install --python {bin}/python --compile-bytecode -e ."]),
        # uv fails (a registry it does not reach): pip installs instead
        (
            1,
            [
                "uv pip install --python {bin}/python --compile-bytecode -e .",
                "python -m pip --disable-pip-version-check install --progress-bar on -e .",
            ],
        ),
        # no uv: pip is asked for it first (the stand-in installs nothing), then installs
        (
            None,
            [
                "python -m pip --disable-pip-version-check install -q uv>=0.4",
                "python -m pip --disable-pip-version-check install --progress-bar on -e .",
            ],
        ),
    ):
        case = tmp_path / f"uv-{uv_exit}"
        case.mkdir()
        venv, record = _venv_with_stand_ins(case, uv_exit=uv_exit)
        result = _make(f"{venv}/.installed", f"VENV={venv}", f"PYTHON={_base_python()}")
        assert result.returncode == 0, result.stderr
        calls = record.read_text().splitlines()
        assert calls == [line.format(bin=venv / "bin") for line in expected], (uv_exit, calls)
        said = "uv did not install; installing with pip" in result.stdout.splitlines()
        assert said == (uv_exit != 0)
        assert (venv / ".installed").exists()
