"""Fixtures for the infrastructure-fault tests: a PostgreSQL cluster of the test's own that it
stops and starts, a SQLite lock held by another connection, a disk that fills up.

- `private_postgres` (module scope): a cluster made with the installed `initdb`/`pg_ctl`
  on a free loopback port; `.url(database)`, `.stop()` (fast shutdown: every connection is
  cut, new ones are refused), `.start()`. Skipped without the binaries (failed in CI).
- `small_disk` (function scope): a 4 MiB tmpfs mounted for the test (root only; skipped
  otherwise, failed in CI); `.fill()` writes a file until the disk answers ENOSPC,
  `.free()` removes it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from turn_support import free_port

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _missing(message: str):
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def _pg_binary(name: str) -> str | None:
    for directory in PG_BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    return shutil.which(name)


class PrivatePostgres:
    """A PostgreSQL cluster of one test module: trust auth, loopback only."""

    def __init__(self):
        self.initdb, self.pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
        if not (self.initdb and self.pg_ctl):
            _missing("initdb/pg_ctl are not installed")
        # initdb refuses root: run the server as the `postgres` account then.
        self.prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.directory = Path(tempfile.mkdtemp(prefix="numi-pg-"))
        if self.prefix:
            shutil.chown(self.directory, "postgres", "postgres")
        self.data = self.directory / "data"
        self.port = free_port()
        self._run(self.initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()
        subprocess.run(
            [*self.prefix, _pg_binary("createdb") or "createdb", "-h", "127.0.0.1"]
            + ["-p", str(self.port), "-U", "postgres", "numi"],
            check=True,
            capture_output=True,
        )

    def _run(self, *args: str) -> None:
        result = subprocess.run([*self.prefix, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {result.stdout}\n{result.stderr}")

    def url(self, database: str = "numi") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory} -c fsync=off"
        self._run(
            self.pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.directory / "log"),
            "-w", "start",
        )  # fmt: skip

    def stop(self) -> None:
        self._run(self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture(scope="module")
def private_postgres():
    cluster = PrivatePostgres()
    yield cluster
    cluster.close()


class SmallDisk:
    """A tiny tmpfs: writes on it fail with ENOSPC once `fill()` has used it up."""

    def __init__(self, path: Path, size: str = "4m"):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            _missing(f"cannot mount a tmpfs: {result.stderr.strip()}")
        self.filler = path / f"filler-{uuid.uuid4().hex[:6]}"

    def fill(self) -> None:
        block = b"\0" * 65536
        # Unbuffered: a block that did not fit is not flushed again (and refused) at close.
        with open(self.filler, "ab", buffering=0) as handle:
            try:
                while True:
                    handle.write(block)
                    handle.flush()
            except OSError:
                pass
        # The last partial block: byte by byte until not even one fits.
        with open(self.filler, "ab", buffering=0) as handle:
            try:
                while True:
                    handle.write(b"\0")
            except OSError:
                pass

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def close(self) -> None:
        for _ in range(50):
            if subprocess.run(["umount", str(self.path)], capture_output=True).returncode == 0:
                return
            time.sleep(0.1)  # a server process may still have a file open there


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        _missing("a full disk needs a tmpfs mount (root)")
    disk = SmallDisk(tmp_path / "small-disk")
    yield disk
    disk.close()
