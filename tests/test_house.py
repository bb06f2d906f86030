"""The house rules as checks, in the way of datasette's tests/test_docs.py: each rule that was
only an intention slipped within a round, so each fails a test here instead.

- No file of `numi/`, `static/`, `templates/` or `tests/` passes `MAX_LINES` lines, but the
  data tables allowed below, each with its reason.
- `docs/architecture.md` is true: every path and every `numi.…` name it gives exists, and
  it describes every package and top-level module of `numi/`.
- Every event type a turn can carry (`numi.turns.events.EVENT_TYPES`, the one list the
  channels enforce and the HTML view dispatches on) is named in the doc's list of events,
  drawn by the HTML view or listed as not drawn, and the literal types the code emits are in
  that list.
- An import inside a function says why it is not at the module's top: `# lazy: <reason>` on
  its line or the line before, one of `LAZY_REASONS` (docs/architecture.md §2).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from numi.turns.events import EVENT_TYPES
from numi.web.live.fragments import HANDLERS, NOT_DRAWN, HtmlView

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
MAX_LINES = 600
CHECKED = ("numi", "static", "templates", "tests")

# Files allowed past MAX_LINES, each for a reason: a table read as one, not code that grew.
ALLOWED: dict[str, str] = {
    # Every setting, its parser, default and bounds in one table that the README's
    # configuration table is tested against: split by area it would be read as several.
    "numi/config.py": "the settings table",
}


def _tracked(*folders: str) -> list[Path]:
    """The files git tracks (or would: untracked but not ignored) below `folders`."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # A path git is merging is listed once per stage: each file once.
    return [ROOT / line for line in sorted(set(out.splitlines())) if (ROOT / line).is_file()]


def _lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def test_no_file_passes_the_size_limit():
    over = {
        str(path.relative_to(ROOT)): count
        for path in _tracked(*CHECKED)
        if "vendor" not in path.parts
        and path.suffix in (".py", ".js", ".css", ".html")
        and (count := _lines(path)) > MAX_LINES
        and str(path.relative_to(ROOT)) not in ALLOWED
    }
    assert not over, f"over {MAX_LINES} lines (split along a seam, or allow with a reason): {over}"


def test_every_allowed_file_still_needs_it():
    for name in ALLOWED:
        assert (ROOT / name).exists(), f"{name} is allowed but gone: drop it from ALLOWED"
        assert _lines(ROOT / name) > MAX_LINES, f"{name} fits now: drop it from ALLOWED"


# --- the architecture document ----------------------------------------------------------------

_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"^[\w.<>*-]+(/[\w.<>*-]*)+$|^[\w-]+\.(py|md|html|js|css|toml|json|ini)$")
# The folders a path in the doc may be relative to: the repository, or (in the package table,
# where a row names its package's files) any folder of the code, pages, docs or tests.
_BASES = [""] + sorted(
    {
        str(path.parent.relative_to(ROOT)) + "/"
        for path in _tracked("numi", "static", "templates", "docs", "migrations", "tests")
    }
)
# Where the wheel puts the top-level folders (pyproject.toml): no such folder in a checkout.
WHEEL_ONLY = {"numi/templates", "numi/static", "numi/migrations"}


def _doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def _doc_paths() -> set[str]:
    return {
        token.rstrip("/.,")
        for token in _CODE.findall(_doc_text())
        if _PATH.match(token) and not token.startswith("/") and token.rstrip("/") not in WHEEL_ONLY
    }


def _exists(path: str) -> bool:
    # `<section>` and `*` stand for a family of files; the family must have a member.
    pattern = re.sub(r"<[^>]+>", "*", path)
    for base in _BASES:
        if "*" in pattern:
            if any(ROOT.glob(base + pattern)):
                return True
        elif (ROOT / (base + pattern)).exists():
            return True
    return False


def test_every_path_the_doc_names_exists():
    missing = sorted(path for path in _doc_paths() if not _exists(path))
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def test_every_numi_name_the_doc_gives_exists():
    names = {
        match.rstrip(".()")
        for token in _CODE.findall(_doc_text())
        if "extensions[" not in token  # a key of app.extensions, not an object
        for match in re.findall(r"\bnumi(?:\.\w+)+", token)
    }
    assert names, "the doc names no numi.… objects: the pattern is wrong"
    missing = sorted(name for name in names if not _resolves(name))
    assert not missing, f"docs/architecture.md names objects that do not exist: {missing}"


def test_the_doc_describes_every_package_and_module():
    text = _doc_text()
    numi = ROOT / "numi"
    packages = sorted(p.name for p in numi.iterdir() if (p / "__init__.py").exists())
    modules = sorted(p.name for p in numi.glob("*.py") if p.name != "__init__.py")
    undescribed = [f"numi/{name}/" for name in packages if f"numi/{name}/" not in text]
    undescribed += [name for name in modules if not re.search(rf"[`/]{name[:-3]}(\.py)?`", text)]
    assert not undescribed, f"docs/architecture.md does not describe: {undescribed}"


# --- events -----------------------------------------------------------------------------------


def _events_section() -> str:
    text = _doc_text()
    start = text.index("## 7. Events and views")
    return text[start : text.index("\n## ", start + 1)]


def test_every_event_type_is_in_the_doc():
    named = set(_CODE.findall(_events_section()))
    missing = [type_ for type_ in EVENT_TYPES if type_ not in named]
    assert not missing, f"event types missing from docs/architecture.md §7: {missing}"


def test_every_event_type_is_drawn_or_said_not_to_be():
    assert set(HANDLERS) == set(EVENT_TYPES)
    undrawn = [
        type_
        for type_ in EVENT_TYPES
        if not hasattr(HtmlView, HANDLERS[type_]) and type_ not in NOT_DRAWN
    ]
    assert not undrawn, f"HtmlView neither draws nor lists as NOT_DRAWN: {undrawn}"
    assert NOT_DRAWN <= set(EVENT_TYPES)


_EMITTED = re.compile(r"""\.(?:emit|emit_delta|publish)\(\s*(?:[\w.]+,\s*)?["']([a-z_]+)["']""")


@pytest.mark.parametrize("path", _tracked("numi"), ids=lambda p: str(p.relative_to(ROOT)))
def test_literal_event_types_are_known(path):
    if path.suffix != ".py" or "testing" in path.parts:
        return
    unknown = set(_EMITTED.findall(path.read_text(encoding="utf-8"))) - set(EVENT_TYPES)
    assert not unknown, f"{path.name} emits event types not in EVENT_TYPES: {unknown}"


def test_test_modules_have_unique_names():
    """The test folders are not packages: two modules of one name collide on import (one
    run collects only the first)."""
    seen: dict[str, str] = {}
    clashes = []
    for path in _tracked("tests"):
        if path.suffix == ".py" and path.name.startswith("test_"):
            if path.name in seen:
                clashes.append((seen[path.name], str(path.relative_to(ROOT))))
            seen[path.name] = str(path.relative_to(ROOT))
    assert not clashes, f"test modules sharing a name: {clashes}"


# --- imports at the top -----------------------------------------------------------------------

# An import inside a function hides what a module depends on (from its reader, and from a
# layer it should not reach); it stays only for one of these reasons, said where it is.
LAZY_REASONS = re.compile(
    r"#\s*lazy:\s*(?:"
    # `numi serve` and gunicorn's master import the package before gevent patches the stdlib.
    r"(?P<patch>gevent patch order)"
    # an extra of pyproject.toml that may be missing (the feature then says so)
    r"|optional extra (?P<extra>[\w-]+)"
    # a heavy import kept off a process's start (measured: `python -X importtime`, bench/)
    r"|(?P<startup>start-up time)"
    # a genuine import circle with the module named (a top-level import would fail)
    r"|circle with (?P<circle>numi(?:\.\w+)+)"
    r")\b"
)
_PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = set(_PYPROJECT["project"]["optional-dependencies"])


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def function_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The imports inside functions (at any depth), but those under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for branch in child.orelse:
                    walk_one(branch, in_function)
                continue
            walk_one(child, in_function)

    def walk_one(node: ast.AST, in_function: bool) -> None:
        if in_function and isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        walk(node, in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))

    walk(tree, False)
    return found


def lazy_import_problems(source: str) -> list[str]:
    """Each function-local import of `source` without a recognised reason on its line(s) or
    the line before, and each reason that names an extra or a module that does not exist."""
    lines = source.splitlines()
    problems = []
    for node in function_imports(ast.parse(source)):
        said = " ".join(lines[node.lineno - 1 : node.end_lineno])
        before = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        if before.startswith("#"):  # a comment line of its own, not another line's reason
            said = f"{before} {said}"
        match = LAZY_REASONS.search(said)
        where = f"line {node.lineno}: {lines[node.lineno - 1].strip()}"
        if match is None:
            problems.append(f"{where} (move it to the top, or say `# lazy: <reason>`)")
        elif match["extra"] and match["extra"] not in EXTRAS:
            problems.append(f"{where} (no extra {match['extra']!r} in pyproject.toml)")
        elif match["circle"] and importlib.util.find_spec(match["circle"]) is None:
            problems.append(f"{where} (no module {match['circle']})")
    return problems


def test_every_function_local_import_says_why():
    problems = [
        f"{path.relative_to(ROOT)} {problem}"
        for path in _tracked("numi")
        if path.suffix == ".py"
        for problem in lazy_import_problems(path.read_text(encoding="utf-8"))
    ]
    assert not problems, "function-local imports without a reason:\n" + "\n".join(problems)


def test_the_import_check_catches_a_violation():
    """The check itself: what it refuses and what it lets pass."""
    bare = "def f():\n    import json\n    return json\n"
    assert lazy_import_problems(bare) == [
        "line 2: import json (move it to the top, or say `# lazy: <reason>`)"
    ]
    vague = "def f():\n    import json  # lazy: because\n"
    unknown_extra = "def f():\n    import PIL  # lazy: optional extra pictures\n"
    no_module = "def f():\n    # lazy: circle with numi.nowhere\n    import numi\n"
    nested = "class A:\n    def f(self):\n        if True:\n            from os import path\n"
    # A reason covers its own import only, not the one on the next line.
    borrowed = "def f():\n    import csv  # lazy: start-up time\n    import json\n"
    for source in (vague, unknown_extra, no_module, nested, borrowed):
        assert len(lazy_import_problems(source)) == 1, source
    fine = (
        "from typing import TYPE_CHECKING\n"
        "import os\n"
        "def f():\n"
        "    if TYPE_CHECKING:\n"
        "        from numi.services import Services\n"
        "    from PIL import Image  # lazy: optional extra images\n"
        "    # lazy: gevent patch order\n"
        "    from flask import Flask\n"
        "    from numi.render import (  # lazy: start-up time\n"
        "        render_markdown,\n"
        "    )\n"
        "    import numi.errors  # lazy: circle with numi.errors\n"
    )
    assert lazy_import_problems(fine) == []
