"""Install like an app (issue 24): the wheel, built from the sources, installed into a fresh
venv with no checkout on its path, run from another directory on fresh data directories.

One venv for the module (the wheel with only its `gunicorn` extra): it serves the page, a
static file and a demo turn, upgrades a database, runs the README's gunicorn recipe, and
refuses a data directory it cannot write. The wheel is built by the project's own build
backend (setuptools, PEP 517) and installed with its dependencies from the machine's
configured index and cache, by the uv the Makefile puts into the test venv, else by pip:
pip took 41 s of the module's set-up in a CI run (14 s of CPU, most of it resolving the
index's links), uv 8 s (2.4 s). A venv without its own pip and no byte compiling keep the
install short. The sizes and times are printed (`-s` shows them).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from server_wait import answers_healthz, wait_until_ready
from turn_support import SSE, Api, free_port, types

# Building and installing take about a minute on an idle machine, several on a busy one.
pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "numi", "templates", "static", "migrations")
PACKAGED = {"templates": "numi/templates", "static": "numi/static", "migrations": "numi/migrations"}


def _uv() -> str | None:
    """The uv beside this interpreter (the Makefile installs with it), if there is one."""
    uv = Path(sys.executable).parent / "uv"
    return str(uv) if uv.is_file() else None


def _pip() -> list[str]:
    """This interpreter's pip, or (a venv made without pip, see the Makefile) the system's."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    return [shutil.which("python3") or "python3", "-m", "pip"]


def _clean_env(**extra: str) -> dict[str, str]:
    """No PYTHONPATH (it would put the checkout first), no developer NUMI_* settings; byte
    code is written (the install skipped compiling: the first command compiles only what
    it imports, and the later ones reuse it)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")
        and not key.startswith(("NUMI_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(NUMI_AUTO_ENDPOINTS="0", NUMI_LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1", **extra)
    return env


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    # No deadline of its own: a pip install took over 300 s at load average 30; the module's
    # pytest-timeout (600 s) catches a hang.
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result


@dataclass
class Installed:
    wheel: Path
    bin: Path
    elsewhere: Path  # a directory with no checkout in it, the commands' working directory
    timings: dict[str, float]

    def run(self, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            cwd=self.elsewhere,
            env=_clean_env(**env),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check:
            assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
        return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    timings: dict[str, float] = {}
    # A copy of the sources: setuptools' in-tree build/ would otherwise keep deleted files
    # and land in the checkout.
    source = base / "src"
    source.mkdir()
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    uv = _uv()
    started = time.monotonic()
    if uv:
        _run([uv, "build", "--wheel", "-q", "-o", str(base / "dist"), str(source)])
    else:
        _run([*_pip(), "wheel", "--no-deps", "-q", "-w", str(base / "dist"), str(source)])
    timings["build"] = time.monotonic() - started
    (wheel,) = (base / "dist").glob("numi-*.whl")

    started = time.monotonic()
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    with_uv = ["pip", "install", "-q", "--python", str(python), f"{wheel}[gunicorn]"]
    if not uv or subprocess.run([uv, *with_uv], capture_output=True).returncode != 0:
        # As the Makefile does: pip where uv cannot reach the registry pip is set up for.
        install = [*_pip(), "--python", str(python), "install", "-q", "--no-compile"]
        _run([*install, f"{wheel}[gunicorn]"])
    timings["install"] = time.monotonic() - started
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return Installed(wheel, venv / "bin", elsewhere, timings)


@pytest.mark.slow(
    reason="the module's set-up, counted in its first test: builds the wheel and installs it "
    "with its gunicorn extra into a fresh venv, as a user without a checkout would"
)
def test_the_wheel_carries_every_module_template_static_file_and_migration(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    expected = {str(path.relative_to(ROOT)) for path in (ROOT / "numi").rglob("*.py")} | {
        f"{PACKAGED[folder]}/{path.relative_to(ROOT / folder)}"
        for folder in PACKAGED
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    missing = sorted(expected - names)
    assert not missing, f"not in the wheel (pyproject.toml's packages / package-data): {missing}"
    assert not [n for n in names if "__pycache__" in n or n.startswith("tests/")]
    size = installed.wheel.stat().st_size
    print(
        f"\nwheel {installed.wheel.name}: {size / 1024:.0f} KiB, {len(names)} files; "
        f"build {installed.timings['build']:.1f} s, venv + install {installed.timings['install']:.1f} s"
    )


def test_the_installed_numi_is_the_wheel_not_the_checkout(installed):
    where = installed.run("python", "-c", "import numi; print(numi.__file__)").stdout.strip()
    assert where.startswith(str(installed.bin.parent)), where
    assert str(ROOT) not in where
    version = installed.run("numi", "--version").stdout
    assert re.fullmatch(r"numi, version \d+\.\d+\.\d+\S*\n", version), version


def test_db_upgrade_runs_from_another_directory(installed, tmp_path):
    data = tmp_path / "data"
    result = installed.run("numi", "db", "upgrade", NUMI_DATA_DIR=str(data))
    assert "Database is up to date." in result.stdout
    assert (data / "numi.db").stat().st_size > 0


class _Process:
    """A server the wheel's venv runs; .port and .headers as the turn_support clients want."""

    def __init__(self, installed: Installed, args: list[str], port: int, data: Path, **env):
        self.port = port
        self.data = data
        self.log = data.parent / f"server-{port}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [str(installed.bin / args[0]), *args[1:]],
                cwd=installed.elsewhere,
                env=_clean_env(NUMI_DATA_DIR=str(data), NUMI_PORT=str(port), **env),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def token(self) -> str:
        return (self.data / "access_token").read_text().strip()

    def wait_ready(self) -> None:
        wait_until_ready(
            self.proc,
            answers_healthz(self.url),
            what=" ".join(self.proc.args[:2]),
            log=lambda: self.log.read_text(errors="replace"),
        )

    def get(self, path: str) -> tuple[int, str]:
        request = urllib.request.Request(self.url + path, headers=self.headers)
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def test_serve_demo_from_another_directory_serves_the_page_a_static_file_and_a_turn(
    installed, tmp_path
):
    server = _Process(installed, ["numi", "serve", "--demo"], free_port(), tmp_path / "data")
    try:
        server.wait_ready()
        status, page = server.get("/")
        assert status == 200 and "<html" in page
        stylesheet = re.search(r'href="(/static/[^"]+\.css\?v=[0-9a-f]+)"', page)
        assert stylesheet, "the page links its fingerprinted stylesheet"
        status, css = server.get(stylesheet.group(1).replace("&amp;", "&"))
        assert status == 200 and len(css) > 1000

        api = Api(server.url, token=server.token)
        status, body = api.get("/api/endpoints")
        demo = next(e for e in body["endpoints"] if e["name"] == "Demo (scripted)")
        status, chat = api.post("/api/session", {"endpoint_id": demo["id"]})
        assert status == 201, chat
        stream = SSE(
            server, "POST", "/api/chat_stream", {"session": chat["id"], "message": "Hi wheel"}
        )
        try:
            events = list(stream.events())
        finally:
            stream.close()
        assert "done" in types(events), events
        assert "Hi wheel" in api.history(chat["id"])[-1]["content"]
    finally:
        server.stop()


def _readme_gunicorn_recipe() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Running under gunicorn", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_gunicorn_recipe_runs_with_only_the_gunicorn_extra(installed, tmp_path):
    recipe = _readme_gunicorn_recipe()
    upgrade, gunicorn = recipe[-2], recipe[-1]
    assert upgrade == "numi db upgrade" and gunicorn.startswith("gunicorn -k gevent"), recipe
    data = tmp_path / "data"
    installed.run(*upgrade.split(), NUMI_DATA_DIR=str(data))
    port = free_port()
    args = re.sub(r"-b \S+", f"-b 127.0.0.1:{port}", gunicorn).split()
    server = _Process(installed, args, port, data)
    try:
        server.wait_ready()
        status, page = server.get("/")
        assert status == 200 and "<html" in page
    finally:
        server.stop()
    assert "No module named" not in server.log.read_text(errors="replace")


def test_a_data_dir_it_cannot_write_is_one_line_a_code_and_status_2(installed, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    for command in (("numi", "serve"), ("numi", "db", "upgrade")):
        result = installed.run(*command, check=False, NUMI_DATA_DIR=str(blocked / "data"))
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "NUMI_DATA_DIR" in lines[0], result.stderr
        assert lines[0].endswith("(data_dir_unwritable)"), lines[0]
