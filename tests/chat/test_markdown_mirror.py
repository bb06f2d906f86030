"""The Markdown mirror (numi/chat/markdown_mirror.py, `numi export --markdown DIR`): one
readable file per chat with front matter, stable names, updates in place, renames followed,
projects as subfolders, and never a write over a file Numi did not make."""

from __future__ import annotations

import os

from server_wait import HANG_SECONDS
from import_support import imported_chat

HOSTILE = "<script>alert(1)</script>"


def make_chat(client, title="Trip: Lyon", answer="Take the TGV."):
    document = {
        "format": "numi.chat",
        "version": 1,
        "chat": {
            "title": title,
            "model": "model-x",
            "created_at": "2024-05-01T10:00:00Z",
            "settings": {"system_prompt": "Be brief."},
        },
        "messages": [
            {
                "role": "user",
                "content": f"How do I get to Lyon? {HOSTILE}",
                "created_at": "2024-05-01T10:00:00Z",
            },
            {
                "role": "assistant",
                "content": answer,
                "reasoning_content": "Trains are fastest.",
                "meta": {"model": "model-x"},
                "created_at": "2024-05-01T10:00:05Z",
            },
        ],
    }
    return imported_chat(client, document)["id"]


def mirror(app, folder):
    from numi.chat.markdown_mirror import mirror_user
    from numi.identity import local_user

    with app.app_context():
        return mirror_user(local_user().id, folder)


def change(app, chat_id, **fields):
    from sqlalchemy import update

    from numi.extensions import db
    from numi.models import Chat, Message, Project

    with app.app_context():
        chat = db.session.get(Chat, chat_id)
        if "title" in fields:
            chat.title = fields["title"]
        if "answer" in fields:
            db.session.execute(
                update(Message)
                .where(Message.chat_id == chat_id, Message.role == "assistant")
                .values(content=fields["answer"])
            )
        if "project" in fields:
            project = Project(user_id=chat.user_id, name=fields["project"])
            db.session.add(project)
            db.session.flush()
            chat.project_id = project.id
        db.session.commit()


def test_each_chat_is_one_file_with_front_matter_and_its_transcript(
    sqlite_app, sqlite_client, tmp_path
):
    chat_id = make_chat(sqlite_client)
    result = mirror(sqlite_app, tmp_path)
    [path] = result.written
    assert path == tmp_path / f"Trip Lyon-{chat_id[:8]}.md"
    text = path.read_text(encoding="utf-8")
    head, body = text.split("\n---\n", 1)
    assert head.splitlines()[:4] == [
        "---",
        f'id: "{chat_id}"',
        'title: "Trip: Lyon"',
        'model: "model-x"',
    ]
    assert 'created: "2024-05-01T10:00:00Z"' in head and "generated_by: numi" in head
    assert "## You · 2024-05-01 10:00 UTC" in body
    assert "## Assistant · model-x · 2024-05-01 10:00 UTC" in body
    assert "<details><summary>Reasoning</summary>" in body and "Trains are fastest." in body
    assert (
        "> **System prompt**" in body and HOSTILE in body
    )  # text, as written: Markdown is not a page


def test_a_second_export_updates_in_place_follows_renames_and_projects(
    sqlite_app, sqlite_client, tmp_path
):
    chat_id = make_chat(sqlite_client)
    [first] = mirror(sqlite_app, tmp_path).written
    again = mirror(sqlite_app, tmp_path)
    assert again.written == [] and again.unchanged == [first]

    change(sqlite_app, chat_id, answer="Fly instead.")
    edited = mirror(sqlite_app, tmp_path)
    assert edited.written == [first] and "Fly instead." in first.read_text(encoding="utf-8")

    change(sqlite_app, chat_id, title="Lyon by air")
    renamed = mirror(sqlite_app, tmp_path)
    moved = tmp_path / f"Lyon by air-{chat_id[:8]}.md"
    assert renamed.renamed == [(first, moved)] and not first.exists()
    assert 'title: "Lyon by air"' in moved.read_text(encoding="utf-8")

    change(sqlite_app, chat_id, project="Travel")
    in_project = mirror(sqlite_app, tmp_path)
    assert in_project.renamed == [(moved, tmp_path / "Travel" / moved.name)]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md")) == [
        f"Travel/{moved.name}"
    ]
    assert not list(tmp_path.rglob("*.tmp"))  # writes go through a temporary file, renamed


def test_a_file_numi_did_not_write_is_never_overwritten(sqlite_app, sqlite_client, tmp_path):
    chat_id = make_chat(sqlite_client)
    mine = tmp_path / f"Trip Lyon-{chat_id[:8]}.md"
    mine.write_text("# my own notes\n", encoding="utf-8")
    result = mirror(sqlite_app, tmp_path)
    assert result.written == [] and result.skipped[0][0] == mine
    assert mine.read_text(encoding="utf-8") == "# my own notes\n"


def test_the_command_writes_each_users_folder(sqlite_app, sqlite_client, tmp_path, cli_host):
    make_chat(sqlite_client, title="One")
    env = dict(
        os.environ,
        NUMI_DATA_DIR=sqlite_app.config["NUMI_DATA_DIR"],
        NUMI_DATABASE_URL=sqlite_app.config["NUMI_DATABASE_URL"],
        NUMI_AUTO_ENDPOINTS="0",
    )
    out = tmp_path / "vault"
    run = ["export", "--markdown", str(out)]
    first = cli_host.run(run, env=env, input=None, timeout=HANG_SECONDS)
    assert first.returncode == 0, first.stderr
    assert "1 written, 0 unchanged" in first.stdout
    assert [p.name.startswith("One-") for p in out.rglob("*.md")] == [True]
