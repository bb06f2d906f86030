"""The data directory is the owner's only (issue 28 item 12): it holds the database, the
uploads and the secrets, so it is 0700 and what Numi writes there is 0600, also when an
older version left it 0755."""

from __future__ import annotations

import io
import stat
from pathlib import Path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_directory_and_its_files_are_private(sqlite_app, sqlite_client):
    data_dir = Path(sqlite_app.config["NUMI_DATA_DIR"])
    response = sqlite_client.post(
        "/api/upload",
        data={"file": (io.BytesIO(b"private words"), "notes.txt", "text/plain")},
        content_type="multipart/form-data",
    )
    assert response.status_code in (200, 201), response.get_data(as_text=True)[:200]
    assert _mode(data_dir) == 0o700
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert any(p.read_bytes() == b"private words" for p in files), files
    for path in files:
        assert _mode(path) & 0o077 == 0, (path, oct(_mode(path)))
    for path in (p for p in data_dir.rglob("*") if p.is_dir()):
        assert _mode(path) & 0o077 == 0, (path, oct(_mode(path)))


def test_an_older_world_readable_data_directory_is_tightened(tmp_path):
    from numi.config import finalize

    data_dir = tmp_path / "old"
    data_dir.mkdir(mode=0o755)
    (data_dir / "numi.db").write_bytes(b"")
    (data_dir / "numi.db").chmod(0o644)
    finalize({"NUMI_DATA_DIR": str(data_dir), "NUMI_AUTH": "multi", "NUMI_MAX_REQUEST_BYTES": 1024})
    assert _mode(data_dir) == 0o700
    assert _mode(data_dir / "numi.db") == 0o600
    fresh = tmp_path / "new" / "data"
    finalize({"NUMI_DATA_DIR": str(fresh), "NUMI_AUTH": "multi", "NUMI_MAX_REQUEST_BYTES": 1024})
    assert _mode(fresh) == 0o700 and _mode(fresh / "numi.db") == 0o600
    assert all(_mode(p) & 0o077 == 0 for p in fresh.iterdir()), [
        (p, oct(_mode(p))) for p in fresh.iterdir()
    ]
