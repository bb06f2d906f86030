"""Setup that never surprises (issue 24): a bad setting or data directory is one line naming
it, with a code and exit status 2; a second `numi serve` on a data directory says who holds
it; `numi serve --open` opens the browser once ready; `numi --version`. Real `numi`
processes, no mocks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest

from numi.config import SETTINGS, load_config
from numi.setting_values import SettingError

from turn_support import free_port


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


def test_version(root_conftest):
    result = subprocess.run(
        [*root_conftest.numi_command(), "--version"], capture_output=True, text=True, timeout=60
    )
    from numi import __version__

    assert result.returncode == 0 and result.stdout == f"numi, version {__version__}\n"


def test_a_second_server_on_a_data_dir_names_the_holder_and_exits_2(
    live_server_factory, root_conftest
):
    first = live_server_factory()
    port = free_port()
    second = subprocess.run(
        [*root_conftest.numi_command(), "serve", "--port", str(port)],
        env={
            **{k: v for k, v in first.env.items() if k != "NUMI_TEST_FAST_PASSWORD_HASHES"},
            "NUMI_PORT": str(port),
        },
        capture_output=True,
        text=True,
        timeout=60,
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


def test_serve_open_opens_the_browser_at_the_tokened_url_once_ready(tmp_path, root_conftest):
    opened = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}.tmp && mv {opened}.tmp {opened}\n')
    browser.chmod(0o755)
    port = free_port()
    env = root_conftest.server_environment(tmp_path / "data", port, BROWSER=str(browser))
    env.pop("NUMI_ACCESS_TOKEN")  # the generated one, as a newcomer has
    server = subprocess.Popen(
        [*root_conftest.numi_command(), "serve", "--open"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not opened.exists():
            assert server.poll() is None and time.monotonic() < deadline, server.stdout.read()
            time.sleep(0.05)
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
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and "patched first" in result.stdout, result.stderr
