"""bench/ is a folder of scripts that import each other by module name: no circles among
them (issue 36: scaleout.py and scaleout_cpu.py imported each other), and the scripts that
were split still start."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _imports() -> dict[str, set[str]]:
    """Each bench module -> the bench modules it imports (at the top or in a function)."""
    modules = {path.stem: path for path in BENCH.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
        graph[name] = found & modules.keys() - {name}
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return path[path.index(name) :] + [name]
        if name in done:
            return None
        for imported in sorted(graph[name]):
            circle = visit(imported, [*path, name])
            if circle:
                return circle
        done.add(name)
        return None

    for name in sorted(graph):
        circle = visit(name, [])
        if circle:
            return circle
    return None


def test_bench_modules_import_no_circle():
    assert _circle(_imports()) is None, " -> ".join(_circle(_imports()) or [])


def test_the_scale_out_scripts_start():
    for args in (["scaleout_cpu.py", "--help"], ["scaleout.py", "cpu", "--help"]):
        result = subprocess.run(
            [sys.executable, str(BENCH / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0 and "--streams" in result.stdout, result.stderr
