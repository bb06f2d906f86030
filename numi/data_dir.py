"""The data directory: where it is, kept private (0700, files 0600), and the secrets it keeps.

It holds the SQLite database (every user's chats, endpoint keys), the uploads, the secret key
and the access token, so no other local account may read it and no workspace may reach it.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: the data directory is not locked
    fcntl = None

from .errors import NumiError


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(base) / "numi"


def touches_data_dir(path: str, data_dir: str) -> bool:
    """Whether `path` is the data directory, lies inside it, or contains it (real paths:
    symlinks resolved). The data directory holds numi.db (every user's chats, endpoint
    keys) and the secret key, so no workspace may reach it."""
    path, data_dir = os.path.realpath(path), os.path.realpath(data_dir)
    return os.path.commonpath([path, data_dir]) in (path, data_dir)


def private_directory(path: Path) -> None:
    """Make `path` (and its missing parents) and keep it 0700: the data directory holds the
    database, the uploads and the secrets, none of which another local account may read."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)  # made by an older version (0755), or by hand
    except OSError:  # not ours (a shared mount): the owner decides
        pass


def check_writable(path: Path) -> None:
    """Raise OSError unless a file can be created in `path` (tried, not guessed from the mode
    bits: root passes those, a read-only mount does not)."""
    probe = path / f".write-check-{os.getpid()}"
    os.close(os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
    probe.unlink()


def private_file(path: Path) -> None:
    """Create `path` empty with mode 0600 if missing; tighten it to 0600 if it exists."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
    except OSError:
        pass


def persisted_secret(path: Path, nbytes: int = 48) -> str:
    """Return the secret stored at `path`, creating it (mode 0600) on first use."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    secret = secrets.token_urlsafe(nbytes)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another worker created it between our read and open
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(secret)
    return secret


def unwritable(path: str) -> str | None:
    """Why Numi cannot write in `path` (a one-line reason), or None when it can: a file is
    created and removed there, as the database, uploads and secrets will be."""
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".numi-write-check-"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


SERVE_LOCK = "serve.lock"


def lock_for_serving(data_dir: Path, port: int) -> int | None:
    """Hold the data directory for this `numi serve` process: an exclusive lock on
    `<data dir>/serve.lock`, which names the holder (pid and port). Returns the lock's file
    descriptor, to keep open while serving (the kernel releases the lock when the process
    ends, however it ends). Raises NumiError `data_dir_locked` naming the holder.

    Two servers on one data directory without a shared Redis would each run turns the other
    cannot see (two answers to one chat at once). Without fcntl (Windows) nothing is locked.
    """
    if fcntl is None:
        return None

    fd = os.open(data_dir / SERVE_LOCK, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "another process"
        os.close(fd)
        raise NumiError(
            "data_dir_locked",
            f"The data directory {data_dir} is in use by another `numi serve` ({holder}). "
            "Stop it, or give this one another NUMI_DATA_DIR (several processes share one "
            "data directory only with NUMI_REDIS_URL).",
            409,
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}, port {port}\n".encode())
    return fd


def serving_port(data_dir: Path) -> int | None:
    """The port of the `numi serve` that holds `data_dir` now (from its `serve.lock`), or
    None when none does: a lock file left by a stopped server names a port nobody serves."""
    try:
        fd = os.open(data_dir / SERVE_LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                pass  # held: a server is running
            else:
                return None  # free: no server holds the data directory
        found = re.search(r"port (\d+)", os.read(fd, 200).decode("utf-8", "replace"))
    finally:
        os.close(fd)  # also releases a shared lock taken above
    return int(found.group(1)) if found else None
