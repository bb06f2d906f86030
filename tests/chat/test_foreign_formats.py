"""Imports from the apps people leave: Claude.ai, LibreChat, LobeHub, Chatbox, Cherry Studio,
Jan, LM Studio and big-AGI (numi/chat/importers/).

Each fixture under fixtures/imports/ is shaped as the app writes it; where each shape comes
from is in the docstring of its importer module (the app's own export code or its test
data). A round trip through POST /api/import checks what the issue asks each import to
keep: titles, the original dates, branches as versions, reasoning, the system prompt as the
chat's prompt, the model of each answer, and attachments as reference lines."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from import_support import cli_environment, run_import
from server_wait import HANG_SECONDS

FIXTURES = Path(__file__).parent / "fixtures" / "imports"

# file: (titles, shown transcript as (role, text it holds), reasoning one answer holds,
#        rows stored with every version, the first message's date, system prompt,
#        model of the last shown answer)
EXPECTED = {
    "claude.json": (
        ["Sourdough <script>alert(1)</script> starter", "Imported chat"],
        [
            ("user", "[attachment: feeding-log.txt]"),
            ("assistant", "```html"),
            ("user", "Thanks!"),
            ("assistant", "Happy baking!"),
        ],
        "A feeding chart would help.",
        5,
        "2024-11-03T09:15:02",
        None,
        None,
    ),
    "librechat.json": (
        ["Python venv activation"],
        [
            ("user", "[image: error.png]"),
            ("assistant", "python3 -m venv venv"),
            ("user", "thanks"),
            ("assistant", "Happy coding!"),
        ],
        "The venv is probably missing.",
        5,
        "2024-05-01T16:35:11",
        "You are an expert software engineer.",
        "gpt-4o",
    ),
    "lobehub.json": (
        ["Date regex", "Default topic"],
        [("user", "[file: dates.csv]"), ("assistant", "anchored")],
        None,
        3,
        "2025-03-23T12:50:09",
        "You are CAN, an experienced programmer.",
        "deepseek-chat",
    ),
    "chatbox.json": (
        ["Trip to Kyoto · Earlier thread", "Trip to Kyoto"],
        [("user", "Is Kyoto worth it?"), ("assistant", "Yes.")],
        None,
        2,
        "2024-06-02T03:46:40",
        None,
        "gpt-4o-mini",
    ),
    "cherry_studio.json": (
        ["Cheese pairing"],
        [
            ("user", "[image: board.png]"),
            ("assistant", "Munster"),
            ("user", "wine list"),
            ("assistant", "```python"),
        ],
        None,
        5,
        "2025-01-10T10:00:05",
        "Answer in French.",
        "deepseek-r1",
    ),
    "jan.jsonl": (
        ["Summarise the plot of Dune in two lines"],
        [
            ("user", "Dune"),
            ("assistant", "desert planet"),
            ("user", "[file: file-8f3a]"),
            ("assistant", "**Tool call (web_search)**"),
        ],
        "Look it up to be sure.",
        4,
        "2024-09-26T05:20:01",
        None,
        "qwen3-4b",
    ),
    "lm_studio.json": (
        ["Walk a directory tree"],
        [("user", "[file: notes.txt]"), ("assistant", "os.walk"), ("user", "thanks")],
        "os.walk visits every folder.",
        4,
        None,  # LM Studio keeps no time per message: they get the chat's
        "You write short Python.",
        "deepseek-r1-distill-qwen-7b",
    ),
    "big_agi.json": (
        ["Monads", "File review"],
        [("user", "What is a monad?"), ("assistant", "endofunctors")],
        None,
        2,
        "2023-11-14T22:13:30",
        "You are a helpful assistant.",
        "gpt-4-1106-preview",
    ),
}


def upload(client, name: str) -> dict:
    """Import the fixture `name` as a person would: the file's bytes, whatever its shape."""
    raw = (FIXTURES / name).read_bytes()
    return run_import(client, data=raw, content_type="application/json")


def stored(app, chat_id: str):
    """The chat's settings and every stored row (each version), in id order."""
    from sqlalchemy import select

    from numi.extensions import db
    from numi.models import Chat, Message

    with app.app_context():
        chat = db.session.get(Chat, chat_id)
        rows = db.session.execute(
            select(Message).where(Message.chat_id == chat_id).order_by(Message.id)
        ).scalars()
        return chat.settings, [
            (m.role, m.content, m.reasoning_content, m.active, m.created_at, m.meta.get("model"))
            for m in rows
        ]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_format_round_trips_titles_dates_branches_and_reasoning(
    sqlite_app, sqlite_client, name
):
    titles, shown, reasoning, rows, first_date, prompt, model = EXPECTED[name]
    job = upload(sqlite_client, name)
    assert job["state"] == "done", job
    chats = job["result"]["chats"]
    assert [c["title"] for c in chats] == titles
    settings, messages = stored(sqlite_app, chats[0]["id"])
    active = [m for m in messages if m[3]]
    assert len(messages) == rows
    assert [role for role, *_ in active] == [role for role, _ in shown]
    for (role, content, *_), (_, holds) in zip(active, shown, strict=True):
        assert holds in content, (content, holds)
    if reasoning:
        assert any(reasoning == (m[2] or "") for m in messages)
    if first_date:
        assert messages[0][4].isoformat().startswith(first_date)
    assert settings.get("system_prompt") == prompt
    answers = [m for m in active if m[0] == "assistant"]
    assert answers[-1][5] == model
    # Versions show as ‹ n/m › where the file had branches: the hidden ones are stored.
    history = sqlite_client.get(f"/api/history/{chats[0]['id']}?limit=100").get_json()
    versions = [m["version"]["m"] for m in history["messages"] if m["version"]]
    assert (max(versions, default=1) > 1) == (len(messages) > len(active))


def test_the_shown_branch_is_the_one_the_app_showed(sqlite_app, sqlite_client):
    """Chatbox's forks and Cherry Studio's `foldSelected` name the shown answer; the others
    are kept beside it as versions, never lost."""
    for name, shown, hidden in (
        ("chatbox.json", "Nishiki Market.", "Try Pontocho alley."),
        ("cherry_studio.json", "A washed-rind Munster.", "Comté."),
        ("lm_studio.json", "Use os.walk and prune dirs.", "Use glob."),
    ):
        job = upload(sqlite_client, name)
        assert job["state"] == "done", job
        _, messages = stored(sqlite_app, job["result"]["chats"][-1]["id"])
        by_text = {m[1]: m[3] for m in messages}
        assert by_text[shown] is True and by_text[hidden] is False, name


def test_untrusted_text_from_an_export_is_escaped_on_the_page(sqlite_client):
    job = upload(sqlite_client, "claude.json")
    page = sqlite_client.get(f"/c/{job['result']['chats'][0]['id']}").get_data(as_text=True)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert "<img src=x onerror" not in page


def test_an_unknown_file_is_refused_naming_the_formats_numi_reads(sqlite_client):
    job = run_import(sqlite_client, json={"conversations_v9": []})
    assert job["state"] == "failed", job
    assert job["error"]["code"] == "invalid_import"
    for label in ("Claude.ai", "LibreChat", "LobeHub", "Chatbox", "Cherry Studio", "Jan"):
        assert label in job["error"]["message"]
    assert "LM Studio" in job["error"]["message"] and "big-AGI" in job["error"]["message"]
    assert sqlite_client.get("/api/sessions").get_json()["sessions"] == []


@pytest.mark.parametrize(
    "document, where",
    [
        (
            [{"uuid": "c", "name": "x", "chat_messages": [{"uuid": "m", "sender": "robot"}]}],
            "sender",
        ),
        ({"conversationId": "c", "messages": ["not a message"]}, "messages[0]"),
        ({"messages": [{"versions": "nope", "currentlySelected": 0}]}, None),
        ({"__exported_at": "x", "chat-sessions": [{"messages": {"a": 1}}]}, "messages"),
    ],
)
def test_a_malformed_export_imports_nothing(sqlite_client, document, where):
    job = run_import(sqlite_client, json=document)
    assert job["state"] == "failed" and job["error"]["code"] == "invalid_import", job
    if where:
        assert where in job["error"]["message"]
    assert sqlite_client.get("/api/sessions").get_json()["sessions"] == []


def test_a_broken_line_of_a_jan_file_is_named(sqlite_client):
    lines = (FIXTURES / "jan.jsonl").read_text().splitlines()
    raw = "\n".join([lines[0], lines[1][:40], *lines[2:]]).encode()
    job = run_import(sqlite_client, data=raw, content_type="application/json")
    assert job["state"] == "failed" and "Line 2" in job["error"]["message"], job
    one = json.loads(lines[0])
    assert run_import(sqlite_client, json=one)["state"] == "done"  # a one-line file


def test_importing_the_same_file_twice_adds_nothing(sqlite_app, sqlite_client):
    first = upload(sqlite_client, "claude.json")
    assert first["state"] == "done" and len(first["result"]["chats"]) == 2
    again = upload(sqlite_client, "claude.json")
    assert again["state"] == "done", again
    assert again["result"]["chats"] == [] and again["result"]["skipped"] == 2
    assert len(sqlite_client.get("/api/sessions").get_json()["sessions"]) == 2
    page = sqlite_client.get(f"/imports/{again['id']}")
    assert page.status_code == 200 and "imported before: nothing was added" in page.get_data(
        as_text=True
    )
    # A chat deleted since comes back; the one still there is not doubled.
    deleted = first["result"]["chats"][0]["id"]
    assert sqlite_client.delete(f"/api/session/{deleted}").status_code in (200, 204)
    third = upload(sqlite_client, "claude.json")
    assert [c["title"] for c in third["result"]["chats"]] == [first["result"]["chats"][0]["title"]]
    assert third["result"]["skipped"] == 1


def test_numi_import_runs_the_same_job_from_the_command_line(sqlite_app, sqlite_client, cli_host):
    env = cli_environment(sqlite_app)
    run = cli_host.run(
        ["import", str(FIXTURES / "librechat.json")], env=env, input=None, timeout=HANG_SECONDS
    )
    assert run.returncode == 0, run.stderr
    assert "Imported 1 chat (5 messages in the file); 0 already imported before." in run.stdout
    [chat] = sqlite_client.get("/api/sessions").get_json()["sessions"]
    assert chat["title"] == "Python venv activation"
    # The same file through the API now adds nothing: one path, one record of what came in.
    assert upload(sqlite_client, "librechat.json")["result"]["skipped"] == 1


def zipped(**entries: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name.replace("__", "/"), data)
    return out.getvalue()


def test_a_data_export_imports_as_the_zip_it_was_downloaded_in(sqlite_client):
    claude = zipped(
        **{
            "users.json": b"[]",
            "projects.json": b"[]",
            "conversations.json": (FIXTURES / "claude.json").read_bytes(),
        }
    )
    job = run_import(sqlite_client, data=claude, content_type="application/zip")
    assert job["state"] == "done" and len(job["result"]["chats"]) == 2, job
    # An entry's path names nothing on disk: only its base name is read.
    sneaky = zipped(**{"..__..__data.json": (FIXTURES / "cherry_studio.json").read_bytes()})
    job = run_import(sqlite_client, data=sneaky, content_type="application/zip")
    assert job["state"] == "done" and job["result"]["chats"][0]["title"] == "Cheese pairing"


@pytest.mark.parametrize(
    "raw, code, says",
    [
        (zipped(**{"conversations.json": b"[]" * 5000})[:-30], "invalid_import", "damaged"),
        (
            zipped(**{"notes.txt": b"hello", "a.json": b"[]", "b.json": b"[]"}),
            "invalid_import",
            "conversations.json",
        ),
        (
            zipped(**{"conversations.json": b" " * 3_000_000 + b"[]"}),
            "import_too_large",
            "larger than",
        ),
    ],
    ids=["truncated", "nothing-to-read", "bomb"],
)
def test_a_bad_zip_is_refused_and_imports_nothing(make_app, raw, code, says):
    app = make_app(NUMI_MAX_REQUEST_BYTES=1_000_000)
    client = app.test_client()
    job = run_import(client, data=raw, content_type="application/zip")
    assert job["state"] == "failed" and job["error"]["code"] == code, job
    assert says in job["error"]["message"]
    assert client.get("/api/sessions").get_json()["sessions"] == []


def test_what_one_user_imported_never_stops_another_importing_it(multi_app, client_a, client_b):
    """The skip of chats imported before looks at the importing user's chats only."""
    assert len(upload(client_a, "lobehub.json")["result"]["chats"]) == 2
    job = upload(client_b, "lobehub.json")
    assert job["state"] == "done" and len(job["result"]["chats"]) == 2, job
    assert job["result"]["skipped"] == 0
    for client in (client_a, client_b):
        assert len(client.get("/api/sessions").get_json()["sessions"]) == 2


def test_a_preview_says_what_an_import_would_add_and_writes_nothing(sqlite_client):
    raw = (FIXTURES / "claude.json").read_bytes()
    job = run_import(
        sqlite_client, "/api/import?preview=1", data=raw, content_type="application/json"
    )
    assert job["state"] == "done", job
    assert job["result"]["preview"] == {
        "kind": "chats",
        "format": "Claude.ai (conversations.json)",
        "chats": 2,
        "messages": 7,
        # The fixture's two files: named in reference lines, their bytes not in the export.
        "attachments": 2,
        "imported_before": 0,
        "unreadable": 0,
        "unreadable_chats": [],
    }
    assert sqlite_client.get("/api/sessions").get_json()["sessions"] == []
    page = sqlite_client.get(f"/imports/{job['id']}").get_data(as_text=True)
    assert (
        "2 chats, 7 messages, 2 attachments (names only) from Claude.ai (conversations.json)"
        in page
    )
    assert "Nothing was written." in page

    assert run_import(sqlite_client, data=raw, content_type="application/json")["state"] == "done"
    again = run_import(
        sqlite_client, "/api/import?preview=1", data=raw, content_type="application/json"
    )
    assert again["result"]["preview"]["imported_before"] == 2
    refused = run_import(sqlite_client, "/api/import?preview=1", json={"unknown": True})
    assert refused["state"] == "failed" and refused["error"]["code"] == "invalid_import"
