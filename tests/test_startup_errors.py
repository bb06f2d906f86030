"""Setup that never surprises (issue 24): a bad setting or data directory is one line naming
it, with a code and exit status 2; a second `numi serve` on a data directory says who holds
it; `numi serve --open` opens the browser once ready; `numi --version`. Real `numi`
processes, no mocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from numi.config import SETTINGS, load_config
from numi.setting_values import SettingError

from server_wait import HANG_SECONDS, wait_until_ready
from turn_support import free_port
from fixtures.live_server import numi_command, server_environment


def _one_line(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "name, value, says",
    [
        ("NUMI_PORT", "abc", "must be a whole number"),
        ("NUMI_PORT", "99999", "must be from 1 to 65535"),
        ("NUMI_AUTH", "foo", "must be one of single, multi, none"),
        ("NUMI_LOG_LEVEL", "LOUD", "must be one of DEBUG, INFO"),
        ("NUMI_SECURE_COOKIES", "ture", "must be true or false"),
        ("NUMI_PROVIDER_TIMEOUT_SECONDS", "soon", "must be a number"),
        ("NUMI_PAGE_SIZE_CHATS", "0", "must be at least 1"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(numi_cli, name, value, says):
    for command in (("serve",), ("db", "upgrade")):
        result, data_dir = numi_cli(*command, **{name: value})
        line = _one_line(result)
        assert line.startswith(f"Error: {name}={value!r}: ") and says in line, line
        assert line.endswith("(invalid_setting)"), line
        assert not (data_dir / "numi.db").exists(), "nothing was created"


def test_a_data_dir_that_cannot_be_created_is_one_line(numi_cli, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    result, _ = numi_cli("serve", NUMI_DATA_DIR=str(blocked / "data"))
    line = _one_line(result)
    assert "NUMI_DATA_DIR" in line and line.endswith("(data_dir_unwritable)"), line


def test_a_data_dir_that_exists_but_cannot_be_written_is_one_line(numi_cli, tmp_path):
    data = tmp_path / "read-only"
    data.mkdir(mode=0o700)
    if os.geteuid() == 0:
        # root passes mode bits; the immutable attribute stops root too (ext4, xfs, btrfs).
        if subprocess.run(["chattr", "+i", str(data)], capture_output=True).returncode != 0:
            pytest.skip("running as root on a file system without chattr +i")
    else:
        data.chmod(0o500)
    try:
        result, _ = numi_cli("db", "upgrade", NUMI_DATA_DIR=str(data))
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(data)], check=True)
        data.chmod(0o700)
    line = _one_line(result)
    assert line.endswith("(data_dir_unwritable)") and str(data) in line, line


def test_every_setting_refuses_what_it_cannot_read():
    """Each kind of setting (number, whole number, choice, true/false, level) names itself;
    text settings take anything. No setting turns a typo into its default silently."""
    refused = 0
    for setting in SETTINGS:
        for bad in ("not-a-value", "-5"):
            try:
                load_config({setting.name: bad})
            except SettingError as exc:
                assert exc.message.startswith(f"{setting.name}={bad!r}: "), exc.message
                assert exc.code == "invalid_setting"
                refused += 1
    assert refused > len(SETTINGS)  # most refuse both; the text ones neither


def test_a_boolean_reads_its_words_in_any_case():
    for word, value in (("TRUE", True), ("on", True), ("1", True), ("No", False), ("0", False)):
        assert load_config({"NUMI_SECURE_COOKIES": word})["NUMI_SECURE_COOKIES"] is value
    assert load_config({"NUMI_LOG_LEVEL": "debug"})["NUMI_LOG_LEVEL"] == "DEBUG"


def test_version():
    # A process of its own: the installed console script is what answers.
    result = subprocess.run(
        [*numi_command(), "--version"], capture_output=True, text=True, timeout=HANG_SECONDS
    )
    from numi import __version__

    assert result.returncode == 0 and result.stdout == f"numi, version {__version__}\n"


def test_a_second_server_on_a_data_dir_names_the_holder_and_exits_2(live_server_factory):
    first = live_server_factory()  # forked (a real process, its own pid): it only holds the lock
    port = free_port()
    # A process of its own: the second `serve`'s exit status and its one line are tested.
    second = subprocess.run(
        [*numi_command(), "serve", "--port", str(port)],
        env={
            **{k: v for k, v in first.env.items() if k != "NUMI_TEST_FAST_PASSWORD_HASHES"},
            "NUMI_PORT": str(port),
        },
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    line = _one_line(second)
    assert f"pid {first.proc.pid}, port {first.port}" in line, line
    assert line.endswith("(data_dir_locked)"), line
    # the first one goes on serving; once it has stopped, the data directory is free again
    with urllib.request.urlopen(first.url + "/healthz", timeout=5) as response:
        assert response.status == 200
    first.stop()
    first.start()
    first.stop()


@pytest.mark.redis
def test_servers_sharing_redis_share_a_data_dir(live_server_factory, redis_settings):
    settings = redis_settings()
    first = live_server_factory(**settings)
    second = live_server_factory(**settings, NUMI_DATA_DIR=str(first.data_dir))
    for server in (first, second):
        with urllib.request.urlopen(server.url + "/healthz", timeout=5) as response:
            assert response.status == 200
    second.stop()
    first.stop()


def test_serve_open_opens_the_browser_at_the_tokened_url_once_ready(tmp_path):
    opened = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}.tmp && mv {opened}.tmp {opened}\n')
    browser.chmod(0o755)
    port = free_port()
    env = server_environment(tmp_path / "data", port, BROWSER=str(browser))
    env.pop("NUMI_ACCESS_TOKEN")  # the generated one, as a newcomer has
    server = subprocess.Popen(
        [*numi_command(), "serve", "--open"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until_ready(
            server,
            opened.exists,
            what="numi serve --open",
            log=lambda: server.stdout.read() if server.poll() is not None else "",
        )
        url = opened.read_text().strip()
        token = (tmp_path / "data" / "access_token").read_text().strip()
        # The one-time sign-in link (issue 28 item 11): never the token itself.
        assert url.startswith(f"http://127.0.0.1:{port}/sign-in?code=") and token not in url
        browser_session = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with browser_session.open(url, timeout=10) as response:  # ready when opened
            assert response.status == 200 and "<html" in response.read().decode()
    finally:
        server.terminate()
        server.wait(10)


def _in_a_child(probe: str) -> subprocess.CompletedProcess:
    """Run `probe` in a fresh interpreter (importing numi.cli monkey-patches it)."""
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=HANG_SECONDS
    )


def test_the_command_line_monkey_patches_before_anything_heavy_is_imported():
    """numi/cli.py patches first; what it imports before (the package, its version, the
    demo's name) pulls in none of Flask, SQLAlchemy, the SDKs or ssl."""
    probe = (
        "import sys\n"
        "import gevent.monkey as m\n"
        "real = m.patch_all\n"
        "def patch_all(*a, **k):\n"
        "    heavy = [n for n in ('flask', 'sqlalchemy', 'openai', 'anthropic', 'ssl') if n in sys.modules]\n"
        "    assert not heavy, heavy\n"
        "    return real(*a, **k)\n"
        "m.patch_all = patch_all\n"
        "import numi.cli\n"
        "assert m.is_module_patched('socket') and m.is_module_patched('threading')\n"
        "print('patched first')\n"
    )
    result = _in_a_child(probe)
    assert result.returncode == 0 and "patched first" in result.stdout, result.stderr


def test_a_bad_setting_under_gunicorn_is_one_line(tmp_path):
    """Issue 35: under gunicorn a bad setting was a 51-line traceback from the worker (exit
    status 3). With Numi's gunicorn settings the master refuses it before it starts: one
    line, exit status 2. Without them the worker prints the one line and gunicorn stops
    ("App failed to load", 4) rather than starting the worker again."""
    gunicorn = Path(sys.executable).with_name("gunicorn")
    if not gunicorn.exists():
        pytest.skip("gunicorn is not installed (the gunicorn extra)")
    port = free_port()
    env = server_environment(tmp_path / "data", port, NUMI_AUTH="foo")
    command = [str(gunicorn), "-k", "gevent", "-w", "1", "-b", f"127.0.0.1:{port}"]
    refused = subprocess.run(
        [*command, "-c", "python:numi.gunicorn_config", "numi.wsgi:app"],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    line = _one_line(refused)
    assert line == "Error: NUMI_AUTH='foo': must be one of single, multi, none. (invalid_setting)"
    bare = subprocess.run(
        [*command, "numi.wsgi:app"], env=env, capture_output=True, text=True, timeout=HANG_SECONDS
    )
    assert bare.returncode == 4 and "Traceback" not in bare.stderr, bare.stderr
    said = [entry for entry in bare.stderr.splitlines() if entry.startswith("Error:")]
    assert said == [line], bare.stderr


def test_open_without_numi_port_links_to_the_running_servers_port(live_server_factory):
    """Issue 35: `numi open` without NUMI_PORT linked to 8765 while the server ran on
    another port. The data directory's serve.lock names the running server's port; a lock
    file left by a stopped server is not believed."""
    server = live_server_factory()  # forked: `numi open` is the process under test
    assert server.port != 8765
    env = {key: value for key, value in server.env.items() if key != "NUMI_PORT"}
    env["BROWSER"] = "true"  # a browser that opens the link and says it did

    def opened() -> str:
        # A process of its own each: `webbrowser` reads BROWSER once per process.
        result = subprocess.run(
            [*numi_command(), "open"],
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_SECONDS,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert opened().startswith(f"Opening http://127.0.0.1:{server.port}/sign-in?code=")
    server.stop()
    assert (server.data_dir / "serve.lock").exists()
    assert opened().startswith("Opening http://127.0.0.1:8765/")


def test_ctrl_c_stops_the_server_with_one_line(live_server_factory):
    """Issue 35: Ctrl-C printed gevent's KeyboardInterrupt report (a traceback or a bare
    timestamp). It stops the server as SIGTERM does and says so in one line."""
    server = live_server_factory(own_process=True)
    with urllib.request.urlopen(server.url + "/healthz", timeout=5) as response:
        assert response.status == 200
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(60) == 0, server.log()
    said = server.log().split("Numi is running on", 1)[1].splitlines()[1:]
    assert [line for line in said if line.strip()] == ["Numi stopped."], server.log()


def test_the_command_line_is_a_package_of_command_groups():
    """Issue 36: numi/cli.py had grown to 650 lines; numi/cli/ holds one module per command
    group, `numi.cli:main` (the console script) has every command, and serve's server
    machinery is imported only when it serves. In a child process: importing numi.cli
    monkey-patches."""
    result = _in_a_child(
        "import pathlib, sys\n"
        "import numi.cli as cli\n"
        "print(sorted(cli.main.commands))\n"
        "print(hasattr(cli, '__path__'))\n"
        "print(max(len(p.read_text().splitlines()) for p in pathlib.Path(cli.__file__).parent.glob('*.py')))\n"
        "print([m for m in ('gevent.pywsgi', 'numi.http_server', 'numi.shutdown') if m in sys.modules])\n"
    )
    assert result.returncode == 0, result.stderr
    commands, package, longest, server_modules = result.stdout.splitlines()
    assert commands == str(
        ["db", "dev", "endpoint", "export", "import", "key", "open", "serve", "token", "user"]
    )
    assert package == "True" and int(longest) <= 600 and server_modules == "[]", result.stdout
