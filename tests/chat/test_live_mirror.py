"""The live Markdown mirror (numi/chat/live_mirror.py, Settings → Markdown mirror): the
folder follows a rename, a move, a project's rename, an import and a delete (to `.trash/`)
within the delay, on the
in-process app and real files on both backends; a full disk pauses it with the reason
shown, and it resumes by itself; a bad folder is refused with its code and changes nothing;
in multi-user mode the folder is the admin's root and the user's name; the Export menus'
zip holds the same files. On a live `numi serve`: a real turn's answer reaches the file,
and a change committed by a process that died before writing it is written after the
restart."""

from __future__ import annotations

import io
import os
import time
import zipfile

import gevent
import pytest
from import_support import imported_chat
from turn_support import Api, make_chat, run_turn, turn_server_env, wait_until

from numi.services import services
from numi.testing import Scenario

WAIT = 30  # a generous bound; reached only on a bug


def settle(app, what: str, condition=lambda: True):
    """Let the app's greenlets run (this process is not monkey-patched: they run while we
    sleep in gevent) until its mirror has written everything and `condition()` holds."""
    deadline = time.monotonic() + WAIT
    while not (services(app).mirror.idle() and condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        gevent.sleep(0.01)


def new_chat(client, title: str, answer: str = "Take the TGV.") -> str:
    document = {
        "format": "numi.chat",
        "version": 1,
        "chat": {"title": title, "model": "model-x", "created_at": "2024-05-01T10:00:00Z"},
        "messages": [
            {"role": "user", "content": "How do I get to Lyon?"},
            {"role": "assistant", "content": answer},
        ],
    }
    return imported_chat(client, document)["id"]


def files(folder) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.md"))


def turn_on(client, folder) -> dict:
    response = client.put("/api/mirror", json={"folder": str(folder)})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_the_folder_follows_a_rename_a_move_and_a_delete(app, client, tmp_path):
    app.config["NUMI_MIRROR_DELAY_SECONDS"] = 0.05
    app.config["NUMI_MIRROR_MIN_FREE_MB"] = 0
    kept, other = new_chat(client, "Lyon"), new_chat(client, "Paris")
    vault = tmp_path / "vault"
    assert turn_on(client, vault)["folder"] == str(vault.resolve())
    settle(app, "the first update", lambda: len(files(vault)) == 2)
    assert files(vault) == [f"Lyon-{kept[:8]}.md", f"Paris-{other[:8]}.md"]

    client.patch(f"/api/session/{kept}", json={"title": "Lyon by air"})
    settle(app, "the rename", lambda: (vault / f"Lyon by air-{kept[:8]}.md").exists())
    assert 'title: "Lyon by air"' in (vault / f"Lyon by air-{kept[:8]}.md").read_text("utf-8")

    project = client.post("/api/projects", json={"name": "Travel"}).get_json()
    client.patch(f"/api/session/{kept}", json={"project_id": project["id"]})
    settle(app, "the move", lambda: (vault / "Travel").is_dir())
    client.patch(f"/api/projects/{project['id']}", json={"name": "Trips"})
    settle(app, "the project's rename", lambda: (vault / "Trips").is_dir())
    assert not (vault / "Travel").exists() or not list((vault / "Travel").iterdir())

    # An import's chats appear when it ends (they are revealed by one bulk statement).
    later = new_chat(client, "Nice")
    settle(app, "the import", lambda: (vault / f"Nice-{later[:8]}.md").exists())

    assert client.delete(f"/api/session/{other}").status_code in (200, 204)
    settle(app, "the delete", lambda: (vault / ".trash").is_dir())
    assert files(vault) == [
        ".trash/" + f"Paris-{other[:8]}.md",
        f"Nice-{later[:8]}.md",
        f"Trips/Lyon by air-{kept[:8]}.md",
    ]
    assert not list(vault.rglob("*.tmp"))


def test_a_full_disk_pauses_the_mirror_with_its_reason_and_it_resumes(app, client, tmp_path):
    app.config.update(NUMI_MIRROR_DELAY_SECONDS=0.05, NUMI_MIRROR_MIN_FREE_MB=0)
    app.config["NUMI_MIRROR_RETRY_SECONDS"] = 0.1
    chat_id = new_chat(client, "Lyon")
    vault = tmp_path / "vault"
    turn_on(client, vault)
    settle(app, "the first update", lambda: files(vault))
    [path] = vault.glob("*.md")

    # More free space asked for than any disk here has: the disk counts as full.
    app.config["NUMI_MIRROR_MIN_FREE_MB"] = 10**12
    client.patch(f"/api/session/{chat_id}", json={"title": "Lyon by air"})
    settle(app, "the pause", lambda: client.get("/api/mirror").get_json()["paused"])
    paused = client.get("/api/mirror").get_json()["paused"]
    assert "disk of the mirror folder is full" in paused
    assert path.exists() and files(vault) == [path.name]  # nothing written meanwhile
    page = client.get("/settings/markdown-mirror").get_data(as_text=True)
    assert "Paused:" in page and "goes on by itself" in page

    app.config["NUMI_MIRROR_MIN_FREE_MB"] = 0
    renamed = vault / f"Lyon by air-{chat_id[:8]}.md"
    settle(app, "the resume", lambda: renamed.exists())
    assert client.get("/api/mirror").get_json()["paused"] is None
    assert files(vault) == [renamed.name]


def test_a_bad_folder_is_refused_with_its_code_and_changes_nothing(app, client, tmp_path):
    data_dir = app.config["NUMI_DATA_DIR"]
    a_file = tmp_path / "notes.md"
    a_file.write_text("mine\n", encoding="utf-8")
    for folder, code in [
        ("", "mirror_folder_invalid"),
        ("relative/notes", "mirror_folder_invalid"),
        (os.path.join(data_dir, "mirror"), "mirror_folder_in_data_dir"),
        (str(a_file), "mirror_folder_not_writable"),
        (str(a_file / "below"), "mirror_folder_not_writable"),
    ]:
        response = client.put("/api/mirror", json={"folder": folder})
        assert response.status_code == 400, folder
        assert response.get_json()["error"]["code"] == code, folder
    assert client.get("/api/mirror").get_json()["folder"] is None
    assert a_file.read_text(encoding="utf-8") == "mine\n"

    # With a root set, nothing outside it, a symlink leading out included.
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    app.config["NUMI_MIRROR_ROOT"] = str(root)
    for folder in [str(tmp_path / "elsewhere"), str(root / "out" / "x"), "../escape"]:
        response = client.put("/api/mirror", json={"folder": folder})
        assert response.get_json()["error"]["code"] == "mirror_outside_root", folder
    assert turn_on(client, "inside")["folder"] == str((root / "inside").resolve())

    form = client.post("/settings/markdown-mirror", data={"folder": str(tmp_path / "x")})
    assert form.status_code == 400
    assert "The mirror folder must lie inside" in form.get_data(as_text=True)
    assert client.get("/api/mirror").get_json()["folder"] == str((root / "inside").resolve())


def test_the_export_menu_offers_every_chat_as_a_markdown_zip(app, client):
    chat_id = new_chat(client, "Lyon")
    project = client.post("/api/projects", json={"name": "Travel"}).get_json()
    client.patch(f"/api/session/{chat_id}", json={"project_id": project["id"]})
    page = client.get(f"/c/{chat_id}").get_data(as_text=True)
    assert 'href="/api/export/markdown.zip" download>All chats (Markdown, zip)' in page
    archive = zipfile.ZipFile(io.BytesIO(client.get("/api/export/markdown.zip").data))
    assert archive.namelist() == [f"Travel/Lyon-{chat_id[:8]}.md"]
    assert 'project: "Travel"' in archive.read(archive.namelist()[0]).decode("utf-8")


def test_multi_user_mirrors_live_in_the_admins_root_one_per_user(
    multi_app, users, client_a, client_b, tmp_path
):
    refused = client_a.put("/api/mirror", json={"folder": str(tmp_path)})
    assert refused.status_code == 400
    assert refused.get_json()["error"]["code"] == "mirror_no_root"

    multi_app.config.update(
        NUMI_MIRROR_ROOT=str(tmp_path / "root"),
        NUMI_MIRROR_DELAY_SECONDS=0.05,
        NUMI_MIRROR_MIN_FREE_MB=0,
    )
    alice, bob = new_chat(client_a, "Alice's"), new_chat(client_b, "Bob's")
    # What a user types is not a folder here: each writes to the root's folder of their name.
    state = client_a.put("/api/mirror", json={"folder": "/etc"}).get_json()
    assert state == {
        "folder": str((tmp_path / "root" / "alice").resolve()),
        "paused": None,
        "chooses_folder": False,
    }
    turn_on(client_b, "")
    settle(multi_app, "both mirrors", lambda: len(files(tmp_path / "root")) == 2)
    assert files(tmp_path / "root") == [f"alice/Alice s-{alice[:8]}.md", f"bob/Bob s-{bob[:8]}.md"]

    # The zip holds the user's own chats only, as the mirror names them.
    response = client_a.get("/api/export/markdown.zip")
    assert response.status_code == 200 and response.mimetype == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.data))
    assert archive.namelist() == [f"Alice s-{alice[:8]}.md"]
    text = archive.read(f"Alice s-{alice[:8]}.md").decode("utf-8")
    assert "generated_by: numi" in text and "Take the TGV." in text


@pytest.fixture(scope="module")
def server(live_server_factory, module_database_url):
    started = live_server_factory(
        **turn_server_env(
            NUMI_DATABASE_URL=module_database_url,
            NUMI_MIRROR_DELAY_SECONDS="0.2",
            NUMI_MIRROR_MIN_FREE_MB="0",
        )
    )
    yield started
    started.stop()


def test_a_finished_turn_reaches_the_file_and_a_restart_catches_up(server, scripted, tmp_path):
    """Live `numi serve`: the answer of a real turn is in the chat's file; a change the
    process committed but died before writing is written by the next process."""
    api = Api(server.url)
    vault = tmp_path / "vault"
    assert api.call("PUT", "/api/mirror", {"folder": str(vault)})[0] == 200
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("Take the night train."))
    run_turn(server, chat["id"], "How do I get to Lyon?", timeout=60)
    [path] = wait_until(
        lambda: [p for p in vault.glob("*.md") if "Take the night train." in p.read_text("utf-8")],
        what="the answer in the mirror",
    )
    assert "How do I get to Lyon?" in path.read_text("utf-8")

    # A delay no test reaches: the rename is committed, and the process dies before writing.
    server.env["NUMI_MIRROR_DELAY_SECONDS"] = "600"
    server.restart()
    assert api.call("PATCH", f"/api/session/{chat['id']}", {"title": "Night train"})[0] == 200
    server.kill()
    assert path.exists()

    server.env["NUMI_MIRROR_DELAY_SECONDS"] = "0.2"
    server.start()
    other = make_chat(api, scripted)
    api.call("PATCH", f"/api/session/{other['id']}", {"title": "Another"})
    # The new process's first update of the user checks the whole folder.
    wait_until(
        lambda: (vault / f"Night train-{chat['id'][:8]}.md").exists(),
        what="the rename caught up on",
    )
    assert not path.exists()


def upload(client, name: str, data: bytes) -> int:
    response = client.post("/api/upload", data={"file": (io.BytesIO(data), name)})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["attachments"][0]["id"]


def test_attachments_sit_beside_the_file_under_safe_names_and_follow_the_chat(
    app, client, tmp_path
):
    """Issue 42: each chat's attachments copied into `<chat>.files/` and linked from it;
    names from the uploader made safe; the folder renamed with the chat and moved to
    `.trash/` with it; the zip holds the same files."""
    app.config["NUMI_MIRROR_DELAY_SECONDS"] = 0.05
    app.config["NUMI_MIRROR_MIN_FREE_MB"] = 0
    other = new_chat(client, "Paris")
    sneaky = f'---\nid: "{other}"\ngenerated_by: numi\n---\nNot a chat file.\n'.encode()
    uploads = {
        ".bashrc": b"alias ls=rm\n",
        "CON.txt": b"reserved on Windows\n",
        "Report.txt": b"first report\n",
        "report.TXT": b"second report, same name but for case\n",
        "notes.md": sneaky,
    }
    ids = {name: upload(client, name, data) for name, data in uploads.items()}
    document = {
        "format": "numi.chat",
        "version": 1,
        "chat": {"title": "Lyon", "created_at": "2024-05-01T10:00:00Z"},
        "messages": [
            {
                "role": "user",
                "content": "Here are my files.",
                "content_parts": [{"type": "attachment", "id": i} for i in ids.values()],
            },
            {"role": "assistant", "content": "Thanks."},
        ],
    }
    chat_id = imported_chat(client, document)["id"]
    vault = tmp_path / "vault"
    turn_on(client, vault)
    attached = vault / f"Lyon-{chat_id[:8]}.files"
    settle(app, "the attachments", lambda: attached.is_dir())
    expected = {
        "bashrc": uploads[".bashrc"],
        f"file-{ids['CON.txt']} CON.txt": uploads["CON.txt"],
        "Report.txt": uploads["Report.txt"],
        f"report-{ids['report.TXT']}.TXT": uploads["report.TXT"],
        "notes.md": sneaky,
    }
    assert {p.name: p.read_bytes() for p in attached.iterdir()} == expected
    body = (vault / f"Lyon-{chat_id[:8]}.md").read_text("utf-8")
    assert f"[Report.txt (13 bytes)](Lyon-{chat_id[:8]}.files/Report.txt)" in body
    assert f"(Lyon-{chat_id[:8]}.files/file-{ids['CON.txt']}%20CON.txt)" in body
    # The attached .md with a chat's front matter is no chat file: Paris keeps its own.
    assert files(vault) == [
        f"Lyon-{chat_id[:8]}.files/notes.md",
        f"Lyon-{chat_id[:8]}.md",
        f"Paris-{other[:8]}.md",
    ]

    archive = zipfile.ZipFile(io.BytesIO(client.get("/api/export/markdown.zip").data))
    zipped = {n: archive.read(n) for n in archive.namelist() if ".files/" in n}
    assert zipped == {f"Lyon-{chat_id[:8]}.files/{n}": data for n, data in expected.items()}

    client.patch(f"/api/session/{chat_id}", json={"title": "Lyon files"})
    renamed = vault / f"Lyon files-{chat_id[:8]}.files"
    settle(app, "the rename", lambda: renamed.is_dir() and not attached.exists())
    assert {p.name for p in renamed.iterdir()} == set(expected)

    client.delete(f"/api/session/{chat_id}")
    settle(app, "the delete", lambda: not renamed.exists())
    trashed = vault / ".trash" / renamed.name
    assert {p.name for p in trashed.iterdir()} == set(expected)
    assert not list(vault.rglob("*.numi-*")) and not list(vault.rglob(".numi-*"))
