"""The worker's server zygote (tests/server_zygote.py): the `numi serve` it forks is a real
process, whose exit status, signals and environment behave as a process of its own."""

from __future__ import annotations

import os
import signal
import urllib.error
import urllib.request

import pytest

from fixtures.live_server import ForkedProcess, ServerZygote, server_environment
from server_wait import HANG_SECONDS, answers_healthz, wait_until_ready
from turn_support import free_port


def _status(url: str, path: str) -> int:
    try:
        with urllib.request.urlopen(url + path, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _fork(zygote: ServerZygote, tmp_path, *argv: str, **env: str) -> ForkedProcess:
    data_dir = tmp_path / "data"
    environment = server_environment(data_dir, free_port(), **env)
    return zygote.start(list(argv), env=environment, cwd=str(tmp_path), log=tmp_path / "out.log")


def test_exit_statuses_and_output_come_back(server_zygote, tmp_path):
    zygote = server_zygote
    version = _fork(zygote, tmp_path, "--version")
    assert version.wait(HANG_SECONDS) == 0 and version.returncode == 0
    bad_setting = _fork(zygote, tmp_path, "serve", NUMI_PORT="eighty")
    assert bad_setting.wait(HANG_SECONDS) == 2
    usage = _fork(zygote, tmp_path, "serve", "--no-such-option")
    assert usage.wait(HANG_SECONDS) == 2
    log = (tmp_path / "out.log").read_text()
    assert "numi, version" in log and "NUMI_PORT" in log and "--no-such-option" in log
    assert "Traceback" not in log


def test_signals_reach_the_server_and_it_starts_again(live_server_factory):
    server = live_server_factory()
    assert isinstance(server.proc, ForkedProcess)  # not a process of its own
    first = server.proc
    first.send_signal(signal.SIGSTOP)  # stopped is not exited
    assert first.poll() is None
    first.send_signal(signal.SIGCONT)
    first.terminate()
    assert first.wait(HANG_SECONDS) == 0 and "Numi stopped." in server.log()
    server.start()  # the data directory's lock went with the first
    server.proc.kill()
    assert server.proc.wait(HANG_SECONDS) == -signal.SIGKILL
    server.start()  # after a crash too
    assert _status(server.url, "/healthz") == 200
    with pytest.raises(ProcessLookupError):
        os.kill(first.pid, 0)  # reaped by the zygote, not a zombie


def test_each_start_has_only_its_own_environment(live_server_factory):
    open_server = live_server_factory(NUMI_AUTH="none")
    guarded = live_server_factory()  # started after: the first's NUMI_AUTH must not reach it
    assert _status(open_server.url, "/api/sessions") == 200
    assert _status(guarded.url, "/api/sessions") == 401
    assert "NUMI_AUTH=none" in open_server.log() and "NUMI_AUTH=none" not in guarded.log()


def test_a_start_that_would_import_other_code_is_refused(server_zygote, tmp_path):
    shadow = tmp_path / "release"
    (shadow / "numi").mkdir(parents=True)
    path = os.pathsep.join(filter(None, (str(shadow), os.environ.get("PYTHONPATH"))))
    with pytest.raises(RuntimeError, match="shadows the imported module numi"):
        _fork(server_zygote, tmp_path, "--version", PYTHONPATH=path)


def test_closing_the_zygote_ends_its_servers(tmp_path):
    zygote = ServerZygote()  # its own: the worker's serves every other test
    port = free_port()
    environment = server_environment(tmp_path / "data", port, NUMI_TEST_FAST_PASSWORD_HASHES="1")
    try:
        server = zygote.start(["serve"], env=environment, cwd=str(tmp_path), log=tmp_path / "s.log")
        wait_until_ready(server, answers_healthz(f"http://127.0.0.1:{port}"), what="forked serve")
    finally:
        zygote.close()
    assert zygote.proc is not None and zygote.proc.returncode == 0
    assert server.poll() == -signal.SIGKILL
