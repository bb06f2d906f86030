"""A newcomer's first ten minutes (issue 14): the demo, the CLI's data directory, a taken
port, quiet provider logs, models fetched on add, and make's install progress. Real
`numi` processes, the scripted provider, no mocks."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from turn_support import SSE, Api, types

ROOT = Path(__file__).resolve().parent.parent


def test_serve_demo_answers_without_an_api_key(live_server_factory):
    # Forked by the worker's zygote: the demo as a newcomer's own process starts it, from the
    # installed wheel, is tests/test_wheel.py's (two starts of a fresh interpreter here cost
    # 4 s of CPU for nothing that test does not show).
    server = live_server_factory(serve_args=("--demo",))
    api = Api(server.url, token=server.token)
    status, body = api.get("/api/endpoints")
    demo = next(e for e in body["endpoints"] if e["name"] == "Demo (scripted)")
    status, chat = api.post("/api/session", {"endpoint_id": demo["id"]})
    assert status == 201
    stream = SSE(
        server, "POST", "/api/chat_stream", {"session": chat["id"], "message": "Hello demo"}
    )
    try:
        events = list(stream.events())
    finally:
        stream.close()
    assert "done" in types(events)
    assert sum(1 for e in events if e["type"] == "content") > 1, "the answer streams in pieces"
    answer = api.history(chat["id"])[-1]["content"]
    assert "scripted answer" in answer and "Hello demo" in answer
    # a restart keeps one demo endpoint, pointed at the new provider
    server.stop()
    server.start()
    status, body = api.get("/api/endpoints")
    assert [e["name"] for e in body["endpoints"]].count("Demo (scripted)") == 1
    server.stop()


def test_the_empty_home_page_and_the_readme_mention_the_demo(sqlite_client):
    page = sqlite_client.get("/").get_data(as_text=True)
    # Issue 35: `make demo` exists only in a clone; a pipx install has the `numi` command.
    hint = page.split('class="muted demo-hint"', 1)[1].split("</p>", 1)[0]
    assert "start <code>numi serve --demo</code>" in hint, hint
    assert hint.index("numi serve --demo") < hint.index("make demo"), "the clone's way second"
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in quick_start and ".venv/bin/numi" in quick_start


@pytest.mark.slow(
    reason="four commands, each the real console script in a process of its own on a fresh "
    "data directory, as a newcomer runs them (a Python start and a migration each)"
)
def test_every_cli_command_names_its_data_directory(numi_cli):
    for args in (("db", "upgrade"), ("endpoint", "list"), ("user", "list"), ("token", "show")):
        result, data_dir = numi_cli(*args)
        assert result.returncode == 0, result.stderr
        assert f"data directory {data_dir}" in result.stderr, args
        assert str(data_dir) not in result.stdout or args == ("db", "upgrade"), (
            "stdout stays parseable"
        )


def test_a_taken_port_is_one_line_and_exit_status_2(numi_process):
    # A process of its own: the exit status of a real `numi serve` start is what is tested.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result, _ = numi_process("serve", "--port", str(port))
    assert result.returncode == 2
    assert "running" not in result.stdout
    lines = [
        line for line in result.stderr.splitlines() if line.strip() and "data directory" not in line
    ]
    assert len(lines) == 1 and str(port) in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_provider_http_requests_are_not_logged_at_info(numi_cli, scripted):
    added, _ = numi_cli(
        "endpoint", "add", "Scripted", "--base-url", scripted.openai_base_url, NUMI_LOG_LEVEL="INFO"
    )
    assert added.returncode == 0, added.stderr
    listed, _ = numi_cli("endpoint", "models", "Scripted", NUMI_LOG_LEVEL="INFO")
    assert listed.returncode == 0 and "scripted-model" in listed.stdout, listed.stderr
    assert "HTTP Request" not in listed.stderr and scripted.openai_base_url not in listed.stderr
    debug, _ = numi_cli("endpoint", "models", "Scripted", NUMI_LOG_LEVEL="DEBUG")
    assert "HTTP Request" in debug.stderr, "still there for debugging"


def test_an_endpoint_added_in_settings_fetches_its_models(sqlite_app, sqlite_client, scripted):
    from numi.extensions import db
    from numi.models import Endpoint

    response = sqlite_client.post(
        "/settings/endpoints",
        data={"name": "No default", "kind": "openai_chat", "base_url": scripted.openai_base_url},
    )
    assert response.status_code in (200, 302, 303)
    with sqlite_app.app_context():
        endpoint = db.session.execute(
            db.select(Endpoint).where(Endpoint.name == "No default")
        ).scalar_one()
        assert "scripted-model" in [m["id"] for m in endpoint.models]
    listing = sqlite_client.get("/settings/endpoints").get_data(as_text=True)
    assert "0 models" not in listing


def test_make_shows_pip_progress_and_offers_demo(tmp_path):
    venv = tmp_path / "venv"
    dry = subprocess.run(
        ["make", "-n", "run", f"VENV={venv}"],
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": ""},
        timeout=60,
    )
    assert dry.returncode == 0, dry.stderr
    # One recipe line: uv installs, pip where uv cannot. Neither is quiet (uv prints what it
    # resolved, fetched and installed; pip its progress); only uv's own 2 s install is.
    (recipe,) = [line for line in dry.stdout.splitlines() if "uv pip install" in line]
    by_uv, _, by_pip = recipe.partition("uv pip install")[2].partition("||")
    assert " -q" not in by_uv and "pip install --progress-bar on" in by_pip, recipe
    assert "first time takes a minute or more" in dry.stdout
    demo = subprocess.run(
        ["make", "-n", "demo", f"VENV={venv}"],
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert demo.returncode == 0 and "numi serve --demo" in demo.stdout


def test_the_readme_puts_pipx_injected_gunicorn_on_the_path():
    """Issue 35: `pipx inject numi 'gunicorn[gevent]'` installs gunicorn without putting the
    `gunicorn` command on the PATH; `--include-apps` does."""
    readme = (ROOT / "README.md").read_text()
    injects = [line for line in readme.splitlines() if "pipx inject" in line and "gunicorn" in line]
    assert injects and all("--include-apps" in line for line in injects), injects


def test_built_wheels_are_not_committed():
    """Issue 35: `pip wheel -w dist .` (the README's line) left dist/ untracked in git."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "dist/numi-0.1.0-py3-none-any.whl"], cwd=ROOT
    )
    assert ignored.returncode == 0, "dist/ is not in .gitignore"
