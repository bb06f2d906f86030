"""Workspace file tools: confinement (.. and symlinks), binary and huge files, line ranges,
bounded search, exact-string patches; and the chat settings that give a chat a workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from numi.agent.tools import ToolContext, ToolFailure
from numi.agent.tools.workspace import WORKSPACE_TOOLS

TOOLS = {tool.name: tool for tool in WORKSPACE_TOOLS}


@pytest.fixture
def tree(tmp_path):
    """A workspace with a secret next to it and symlinks that point out of it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text(
        "".join(f"line {i}\n" for i in range(1, 21)) + "def needle():\n    pass\n"
    )
    (ws / "notes.md").write_text("needle in notes\n")
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02needle")
    (ws / "big.txt").write_text("needle\n" + "x" * 2_000_000)
    os.symlink(outside / "secret.txt", ws / "link-to-secret")
    os.symlink(outside, ws / "link-to-outside")
    os.symlink(ws / "notes.md", ws / "inner-link.md")
    return ws, outside


def call(app, name, arguments, ws, *, is_admin=True):
    """What the model reads: the tool's result, or the text of a failure it reports."""
    try:
        with app.app_context():
            return TOOLS[name].run(
                arguments, ToolContext(user_id=1, chat_id="c", is_admin=is_admin, workspace=str(ws))
            )
    except ToolFailure as failure:
        return failure.text


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.txt",
        "/etc/passwd",
        "src/../../outside/secret.txt",
        "link-to-secret",
        "link-to-outside/secret.txt",
        "link-to-outside",
    ],
)
def test_reads_cannot_escape(sqlite_app, tree, path):
    ws, _ = tree
    result = call(sqlite_app, "read_file", {"path": path}, ws)
    assert result.startswith("Error: Refused") and "TOP SECRET" not in result
    assert call(sqlite_app, "list_files", {"path": path}, ws).startswith("Error: Refused")


@pytest.mark.parametrize(
    "path", ["../escaped.txt", "link-to-outside/new.txt", "link-to-secret", "/tmp/escaped.txt"]
)
def test_writes_cannot_escape(sqlite_app, tree, path):
    ws, outside = tree
    assert call(sqlite_app, "write_file", {"path": path, "content": "pwned"}, ws).startswith(
        "Error: Refused"
    )
    assert call(
        sqlite_app, "patch_file", {"path": path, "old_string": "TOP", "new_string": "pwned"}, ws
    ).startswith("Error: Refused")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    # Where each write would have landed had it escaped: nothing is there.
    landing = {
        "../escaped.txt": ws.parent / "escaped.txt",
        "link-to-outside/new.txt": outside / "new.txt",
        "/tmp/escaped.txt": Path("/tmp/escaped.txt"),
    }
    if path in landing:
        assert not landing[path].exists(), landing[path]


def test_symlinks_inside_the_workspace_work(sqlite_app, tree):
    ws, _ = tree
    assert "needle in notes" in call(sqlite_app, "read_file", {"path": "inner-link.md"}, ws)


def test_read_line_ranges_and_refusals(sqlite_app, tree):
    ws, _ = tree
    result = call(
        sqlite_app, "read_file", {"path": "src/app.py", "start_line": 3, "end_line": 5}, ws
    )
    assert result.splitlines()[0] == "src/app.py (lines 3-5 of 22):"
    assert [line.split("\t")[1] for line in result.splitlines()[1:]] == [
        "line 3",
        "line 4",
        "line 5",
    ]
    assert "outside" in call(sqlite_app, "read_file", {"path": "src/app.py", "start_line": 99}, ws)
    assert "binary" in call(sqlite_app, "read_file", {"path": "blob.bin"}, ws)
    assert "too large" in call(sqlite_app, "read_file", {"path": "big.txt"}, ws)
    assert "not a file" in call(sqlite_app, "read_file", {"path": "src"}, ws)


def test_search_is_bounded_and_stays_inside(sqlite_app, tree):
    ws, _ = tree
    result = call(sqlite_app, "search_files", {"pattern": "NEEDLE"}, ws)
    assert "src/app.py:21: def needle():" in result and "notes.md:1: needle in notes" in result
    assert "blob.bin" not in result and "big.txt" not in result  # binary and huge: skipped
    assert "SECRET" not in call(sqlite_app, "search_files", {"pattern": "SECRET"}, ws)
    assert (
        call(sqlite_app, "search_files", {"pattern": "def \\w+", "regex": True, "glob": "*.py"}, ws)
        == "src/app.py:21: def needle():"
    )
    assert "not a valid regular expression" in call(
        sqlite_app, "search_files", {"pattern": "(", "regex": True}, ws
    )
    (ws / "many.txt").write_text("hit\n" * 1000)
    assert "stopped at 200 matches" in call(sqlite_app, "search_files", {"pattern": "hit"}, ws)


def test_write_and_patch(sqlite_app, tree):
    ws, _ = tree
    assert call(
        sqlite_app, "write_file", {"path": "new/dir/file.txt", "content": "alpha beta alpha"}, ws
    ).startswith("Created new/dir/file.txt")
    assert "occurs 2 times" in call(
        sqlite_app,
        "patch_file",
        {"path": "new/dir/file.txt", "old_string": "alpha", "new_string": "x"},
        ws,
    )
    assert "not found" in call(
        sqlite_app,
        "patch_file",
        {"path": "new/dir/file.txt", "old_string": "gamma", "new_string": "x"},
        ws,
    )
    assert call(
        sqlite_app,
        "patch_file",
        {"path": "new/dir/file.txt", "old_string": "beta", "new_string": "BETA"},
        ws,
    ).startswith("Patched")
    assert (ws / "new/dir/file.txt").read_text() == "alpha BETA alpha"
    assert "binary" in call(
        sqlite_app,
        "patch_file",
        {"path": "blob.bin", "old_string": "needle", "new_string": "x"},
        ws,
    )
    listing = call(sqlite_app, "list_files", {"recursive": True}, ws)
    assert "new/dir/file.txt" in listing and "link-to-outside -> (symlink)" in listing
    assert "TOP SECRET" not in listing and "secret.txt" not in listing


def test_non_admin_and_missing_workspace_are_refused(sqlite_app, tree):
    ws, _ = tree
    assert "administrator" in call(sqlite_app, "list_files", {}, ws, is_admin=False)
    assert "does not exist" in call(sqlite_app, "list_files", {}, ws / "gone")
    assert all(tool.admin_only for tool in WORKSPACE_TOOLS)


# --- chat settings -------------------------------------------------------------------------


def test_chat_workspace_setting_must_be_an_existing_directory(sqlite_client, tree):
    ws, outside = tree
    response = sqlite_client.post(
        "/api/session", json={"settings": {"workspace": str(ws / "missing")}}
    )
    assert response.status_code == 400 and response.json["error"]["code"] == "invalid_workspace"
    response = sqlite_client.post("/api/session", json={"settings": {"workspace": "relative/path"}})
    assert response.status_code == 400
    response = sqlite_client.post(
        "/api/session",
        json={"settings": {"workspace": str(ws / "link-to-outside"), "tools": ["read_file"]}},
    )
    assert response.status_code == 201, response.json
    assert response.json["settings"]["workspace"] == str(outside.resolve()), (
        "stored as its real path"
    )


def test_a_workspace_may_not_hold_or_sit_in_the_data_directory(sqlite_app, sqlite_client, tmp_path):
    """numi.db (endpoint keys, every user's chats) and the secret key live in the data
    directory: no workspace may reach it, neither when it is set nor at use."""
    data_dir = sqlite_app.config["NUMI_DATA_DIR"]
    (tmp_path / "data" / "uploads").mkdir(parents=True, exist_ok=True)
    os.symlink(data_dir, tmp_path / "data-link")
    for path in (
        data_dir,
        str(tmp_path),
        str(tmp_path / "data" / "uploads"),
        str(tmp_path / "data-link"),
        "/",
    ):
        response = sqlite_client.post("/api/session", json={"settings": {"workspace": path}})
        assert response.status_code == 400, (path, response.json)
        assert response.json["error"]["code"] == "workspace_data_dir"
    # A workspace stored before the rule (or the data dir moved under it) is refused at use.
    for path in (data_dir, str(tmp_path)):
        result = call(sqlite_app, "read_file", {"path": "numi.db"}, path)
        assert result.startswith("Error:") and "data directory" in result
        with sqlite_app.app_context():
            from numi.agent.tools.bash import BASH

            with pytest.raises(ToolFailure) as refused:
                BASH.run(
                    {"command": "ls"},
                    ToolContext(user_id=1, chat_id="c", is_admin=True, workspace=path),
                )
        assert "data directory" in refused.value.text and refused.value.code == "workspace_data_dir"


def test_only_an_admin_may_set_a_workspace(client_a, tree):
    ws, _ = tree
    response = client_a.post("/api/session", json={"settings": {"workspace": str(ws)}})
    assert response.status_code == 403 and response.json["error"]["code"] == "admin_only"


def test_settings_form_turns_tools_on_and_off(sqlite_client, tree):
    ws, _ = tree
    chat = sqlite_client.post("/api/session", json={}).json
    page = sqlite_client.get(f"/c/{chat['id']}").get_data(as_text=True)
    for name in ("web_search", "fetch_page", "read_file", "bash"):
        assert f'name="tools" value="{name}"' in page
    response = sqlite_client.post(
        f"/c/{chat['id']}/settings",
        headers={"HX-Request": "true"},
        data={
            "tools_shown": "1",
            "tools": ["bash", "read_file"],
            "workspace": str(ws),
            "auto_approve": "1",
        },
    )
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert 'value="bash" checked' in html and f'value="{ws}"' in html
    settings = sqlite_client.get(f"/api/session/{chat['id']}").json["settings"]
    assert settings["tools"] == ["bash", "read_file"] and settings["auto_approve"] is True
    sqlite_client.post(f"/c/{chat['id']}/settings", data={"tools_shown": "1", "workspace": str(ws)})
    settings = sqlite_client.get(f"/api/session/{chat['id']}").json["settings"]
    assert settings["tools"] == [] and settings["auto_approve"] is False
