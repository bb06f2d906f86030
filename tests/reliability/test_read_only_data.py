"""A data directory that cannot be written (issue 20 item 13): at start `numi serve` says so
in one line and exits; when it turns read-only under a running server, uploads answer 503
`storage_unavailable`, not a 500 (sends while the database cannot write: see
test_saves_survive.py). The fault is real: the data directory is bind-mounted read-only
over itself (EROFS, which binds root too; files the server holds open stay writable, as
they would on a filesystem remounted read-only under it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from turn_support import make_chat, turn_server_env

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "context"))
from context_support import upload  # noqa: E402


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


@pytest.fixture
def read_only():
    """`read_only(path)` makes `path` read-only until the test ends."""
    if os.geteuid() != 0:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("a read-only bind mount needs root")
        pytest.skip("a read-only bind mount needs root")
    mounted: list[Path] = []

    def make(path: Path) -> None:
        _mount("--bind", str(path), str(path))
        mounted.append(path)
        _mount("-o", "remount,bind,ro", str(path))

    yield make
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_a_read_only_data_dir_is_storage_unavailable_then_refused_at_start(
    live_server_factory, scripted, read_only
):
    from turn_support import Api

    # A process of its own: its refused start is under test.
    server = live_server_factory(own_process=True, **turn_server_env())
    api = Api(server.url, token=server.token)
    make_chat(api, scripted)
    read_only(server.data_dir)
    with pytest.raises(OSError):
        (server.data_dir / "probe").write_text("x")  # the fault is real

    status, body = upload(server.url, "notes.txt", b"some notes", "text/plain")
    assert status == 503 and body["error"]["code"] == "storage_unavailable", body
    assert "Traceback" not in server.log()

    server.stop()
    with pytest.raises(RuntimeError) as refused:
        server.start()  # it exits: the wait ends there
    assert server.proc.returncode == 2
    said = [line for line in server.log().splitlines() if "Error:" in line]
    # One line naming the directory (the settings' check, `data_dir_unwritable`).
    assert len(said) == 1 and str(server.data_dir) in said[0], said
    assert "data_dir_unwritable" in said[0] or "cannot write" in said[0], said
    assert "Traceback" not in str(refused.value)
