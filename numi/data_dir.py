"""The data directory: where it is, kept private (0700, files 0600), and the secrets it keeps.

It holds the SQLite database (every user's chats, endpoint keys), the uploads, the secret key
and the access token, so no other local account may read it and no workspace may reach it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


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
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".numi-write-check-"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None
