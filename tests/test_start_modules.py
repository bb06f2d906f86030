"""Issue 45: what a start loads. `numi serve` imported every feature's code before its first
answer (the /v1 gateway, /mcp, the importers, research, the code tool): 141 more modules
than a round before, 7 MiB of idle memory and part of its start-up time; and the
sanitiser's library, nh3, 1.5 MiB, before anything was rendered. Those are loaded on first
use (numi/lazy_modules.py); this keeps them from creeping back."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from numi.lazy_modules import LAZY_AT_START, LazyModule, lazy_module

from server_wait import HANG_SECONDS
from turn_support import free_port
from fixtures.live_server import server_environment

ROOT = Path(__file__).resolve().parent.parent

# What `numi serve` does before it answers (numi/cli/serve.py), in a fresh interpreter:
# the command line (which monkey-patches), the app, the schema, the greenlets it starts.
SERVE_PATH = """
import json, sys
from numi.cli import main
from numi.cli.base import make_app, upgraded
from numi.cli.serve import hide_demo_endpoint
from numi.agent.research_resume import keep_resuming
app = upgraded(make_app(announce=False))
hide_demo_endpoint(app)
with app.test_client() as client:
    assert client.get("/healthz").status_code == 200
print(json.dumps(sorted(sys.modules)))
"""


def _modules_at_start(tmp_path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", SERVE_PATH],
        env=server_environment(tmp_path / "data", free_port()),
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_a_start_loads_no_feature_that_is_loaded_on_first_use(tmp_path):
    loaded = _modules_at_start(tmp_path)
    assert "numi.web.gateway" in loaded and "numi.web.mcp_server" in loaded  # the routes are
    early = [
        module
        for module in loaded
        for lazy in LAZY_AT_START
        if module == lazy or module.startswith(lazy + ".")
    ]
    assert early == [], f"imported at start, though loaded on first use: {early}"


def test_a_lazy_module_is_imported_by_its_first_use():
    sys.modules.pop("colorsys", None)  # a small module of the standard library, no state
    module = lazy_module("colorsys")
    assert isinstance(module, LazyModule) and "colorsys" not in sys.modules
    assert repr(module) == "<lazy module 'colorsys', not loaded yet>"
    assert module.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
    assert module.rgb_to_hsv is sys.modules["colorsys"].rgb_to_hsv
    assert repr(module) == "<lazy module 'colorsys', loaded>"


def _layer_of(part: str, layers: list[list[str]]) -> int:
    return next(i for i, names in enumerate(layers) if part in names)


def test_no_lazy_module_points_up_the_layers():
    """import-linter does not see `lazy_module("numi.…")` (a string, the real import under
    TYPE_CHECKING): the layers contract is checked here for those imports."""
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers_contract,) = [
        c for c in contract["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
    ]
    layers = [[p.strip() for p in layer.split("|")] for layer in layers_contract["layers"]]
    found, wrong = 0, []
    for path in (ROOT / "numi").rglob("*.py"):
        if path.name == "lazy_modules.py":  # its docstring's example
            continue
        part = path.relative_to(ROOT / "numi").parts[0].removesuffix(".py")
        for target in re.findall(r'lazy_module\("(numi\.[\w.]+)"\)', path.read_text("utf-8")):
            found += 1
            goes_to = target.split(".")[1]
            if goes_to == part:
                continue
            if _layer_of(goes_to, layers) <= _layer_of(part, layers):
                wrong.append(f"{path.relative_to(ROOT)} -> {target}")
    assert found >= len(LAZY_AT_START) // 2 and not wrong, wrong
