"""Imports from ChatGPT's data export and Open WebUI's chat export, built here as the real
files look: trees with branches, multimodal parts, tool use, hidden system scaffolding."""

from __future__ import annotations

import copy
import io
import json

import pytest
from import_support import form_import, run_import


def node(node_id, parent, children, role=None, parts=None, *, content=None, t=0.0, **message):
    """One node of a ChatGPT `mapping`."""
    if role is None:
        return {"id": node_id, "message": None, "parent": parent, "children": children}
    body = content or {"content_type": "text", "parts": parts or []}
    return {
        "id": node_id,
        "parent": parent,
        "children": children,
        "message": {
            "id": node_id,
            "author": {"role": role, "name": message.pop("name", None), "metadata": {}},
            "create_time": 1_700_000_000 + t,
            "update_time": None,
            "content": body,
            "status": "finished_successfully",
            "end_turn": True,
            "weight": 1.0,
            "metadata": message.pop("metadata", {}),
            "recipient": message.pop("recipient", "all"),
        },
    }


def chatgpt_export() -> list[dict]:
    mapping = {
        n["id"]: n
        for n in [
            node("root", None, ["sys"]),
            node(
                "sys",
                "root",
                ["ctx"],
                "system",
                [""],
                metadata={"is_visually_hidden_from_conversation": True},
            ),
            node(
                "ctx",
                "sys",
                ["u1"],
                "user",
                content={
                    "content_type": "user_editable_context",
                    "user_profile": "I live in Lyon",
                    "user_instructions": "Be brief",
                },
            ),
            node(
                "u1",
                "ctx",
                ["a1"],
                "user",
                content={
                    "content_type": "multimodal_text",
                    "parts": [
                        {
                            "content_type": "image_asset_pointer",
                            "asset_pointer": "file-service://file-AbC123",
                            "size_bytes": 53211,
                            "width": 1024,
                            "height": 768,
                            "fovea": None,
                            "metadata": None,
                        },
                        "What is in this <b>photo</b>?",
                    ],
                },
                t=1,
                metadata={
                    "attachments": [
                        {
                            "id": "file-AbC123",
                            "name": "cat.jpg",
                            "mimeType": "image/jpeg",
                            "size": 53211,
                        }
                    ]
                },
            ),
            node(
                "a1",
                "u1",
                ["u2-old", "u2"],
                "assistant",
                ["A cat on a sofa."],
                t=2,
                metadata={"model_slug": "gpt-4o"},
            ),
            # The user edited their second question: two branches; the second is current.
            node("u2-old", "a1", ["a2-old"], "user", ["How old is it? (first try)"], t=3),
            node("a2-old", "u2-old", [], "assistant", ["Hard to say."], t=4),
            node("u2", "a1", ["th"], "user", ["Compute 2**10 for me"], t=5),
            node(
                "th",
                "u2",
                ["code"],
                "assistant",
                content={
                    "content_type": "thoughts",
                    "thoughts": [{"summary": "Plan", "content": "I should run Python."}],
                    "source_analysis_msg_id": "x",
                },
                t=6,
            ),
            node(
                "code",
                "th",
                ["out"],
                "assistant",
                content={"content_type": "code", "language": "python", "text": "print(2**10)"},
                t=7,
                recipient="python",
            ),
            node(
                "out",
                "code",
                ["a3"],
                "tool",
                content={"content_type": "execution_output", "text": "1024"},
                t=8,
                name="python",
            ),
            node("a3", "out", [], "assistant", ["2**10 is **1024**."], t=9),
        ]
    }
    return [
        {
            "title": "Cat photo & maths",
            "create_time": 1_700_000_000.5,
            "update_time": 1_700_000_100.0,
            "mapping": mapping,
            "current_node": "a3",
            "default_model_slug": "gpt-4o",
            "conversation_id": "c-1",
            "moderation_results": [],
            "plugin_ids": None,
            "is_archived": False,
        },
        {
            "title": "Second",
            "create_time": 1_700_001_000,
            "mapping": {
                "r": node("r", None, ["q"]),
                "q": node("q", "r", ["a"], "user", ["Hello"]),
                "a": node("a", "q", [], "assistant", ["Hi!"]),
            },
            "current_node": "a",
        },
    ]


def openwebui_export() -> list[dict]:
    history = {
        "m1": {
            "id": "m1",
            "parentId": None,
            "childrenIds": ["m2a", "m2b"],
            "role": "user",
            "content": "Describe the attached chart",
            "timestamp": 1_710_000_000,
            "models": ["llama3:8b"],
            "files": [
                {"type": "image", "url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="},
                {"type": "file", "name": "sales.csv", "id": "f1", "size": 120},
            ],
        },
        # Regenerated: two answers, the second is the one shown.
        "m2a": {
            "id": "m2a",
            "parentId": "m1",
            "childrenIds": [],
            "role": "assistant",
            "content": "First answer.",
            "model": "llama3:8b",
            "timestamp": 1_710_000_005,
        },
        "m2b": {
            "id": "m2b",
            "parentId": "m1",
            "childrenIds": ["m3"],
            "role": "assistant",
            "content": "Sales grow <script>alert(1)</script> each quarter.",
            "model": "llama3:8b",
            "timestamp": 1_710_000_009,
            "info": {"eval_count": 42},
        },
        "m3": {
            "id": "m3",
            "parentId": "m2b",
            "childrenIds": ["m4"],
            "role": "user",
            "timestamp": 1_710_000_020,
            "content": [
                {"type": "text", "text": "And this one?"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
            ],
        },
        "m4": {
            "id": "m4",
            "parentId": "m3",
            "childrenIds": [],
            "role": "assistant",
            "content": "Flat.",
            "timestamp": 1_710_000_030_000,
        },  # milliseconds, as some versions write
    }
    return [
        {
            "id": "owui-1",
            "user_id": "u-1",
            "title": "Chart questions",
            "created_at": 1_710_000_000,
            "updated_at": 1_710_000_030,
            "archived": False,
            "pinned": False,
            "meta": {"tags": []},
            "chat": {
                "id": "",
                "title": "Chart questions",
                "models": ["llama3:8b"],
                "params": {},
                "history": {"messages": history, "currentId": "m4"},
                "messages": [history[k] for k in ("m1", "m2b", "m3", "m4")],
                "tags": [],
                "timestamp": 1_710_000_000_000,
            },
        },
        {
            "id": "owui-2",
            "title": "Old style",
            "chat": {
                "title": "Old style",
                "models": ["mistral"],
                "messages": [
                    {"id": "x1", "role": "system", "content": "You are terse."},
                    {"id": "x2", "role": "user", "content": "Hi"},
                    {"id": "x3", "role": "assistant", "content": "Hello."},
                ],
            },
        },
    ]


def upload(client, document):
    """The ended import job of `document` (see import_support.run_import)."""
    return run_import(client, data=json.dumps(document), content_type="application/json")


def transcript(client, chat_id):
    return [
        (m["role"], m["content"], m["reasoning_content"])
        for m in client.get(f"/api/history/{chat_id}?limit=1000").get_json()["messages"]
    ]


def test_chatgpt_current_branch_with_images_tools_and_hidden_messages(
    multi_app, client_a, client_b
):
    job = upload(client_a, chatgpt_export())
    assert job["state"] == "done", job
    chats = job["result"]["chats"]
    assert [c["title"] for c in chats] == ["Cat photo & maths", "Second"]
    assert chats[0]["model"] == "gpt-4o"
    messages = transcript(client_a, chats[0]["id"])
    roles = [m[0] for m in messages]
    assert roles == [
        "user",
        "assistant",
        "user",
        "assistant",
        "assistant",
        "assistant",
        "assistant",
    ]
    first = messages[0][1]
    assert "[image: file-service://file-AbC123 (1024×768)]" in first
    assert "What is in this <b>photo</b>?" in first and "[attachment: cat.jpg]" in first
    text = "\n".join(m[1] for m in messages)
    assert "first try" not in text and "Hard to say" not in text  # the other branch is not shown
    assert (
        "I live in Lyon" not in text and "Be brief" not in text
    )  # custom instructions are not messages
    assert messages[2][1] == "Compute 2**10 for me"
    assert messages[3][2] == "I should run Python."  # thoughts → reasoning
    assert "Tool call (python)" in messages[4][1] and "print(2**10)" in messages[4][1]
    assert "Tool output (python)" in messages[5][1] and "1024" in messages[5][1]
    assert messages[6][1] == "2**10 is **1024**."
    assert transcript(client_a, chats[1]["id"]) == [
        ("user", "Hello", None),
        ("assistant", "Hi!", None),
    ]
    # The other branch is kept as a version of the edited question (1/2 ‹ 2/2 ›).
    current = client_a.get(f"/api/history/{chats[0]['id']}").get_json()["messages"][2]
    assert current["version"]["n"] == 2 and current["version"]["m"] == 2
    older = current["version"]["ids"][0]
    assert client_a.post(f"/api/session/{chats[0]['id']}/messages/{older}/show").status_code == 200
    assert [m[1] for m in transcript(client_a, chats[0]["id"])][2:] == [
        "How old is it? (first try)",
        "Hard to say.",
    ]
    # Owned by the importer only.
    assert client_b.get(f"/api/history/{chats[0]['id']}").status_code == 404


def test_openwebui_history_branch_files_and_flat_messages(multi_app, client_a):
    job = upload(client_a, openwebui_export())
    assert job["state"] == "done", job
    chats = job["result"]["chats"]
    assert [c["title"] for c in chats] == ["Chart questions", "Old style"]
    messages = transcript(client_a, chats[0]["id"])
    assert [m[0] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert "[image: inline image/png]" in messages[0][1] and "[file: sales.csv]" in messages[0][1]
    assert "base64" not in "".join(m[1] for m in messages)  # data URLs are never stored
    assert messages[1][1].startswith("Sales grow")  # the current branch, not "First answer."
    assert messages[2][1] == "And this one?\n\n[image: inline image/jpeg]"
    assert transcript(client_a, chats[1]["id"]) == [
        ("system", "You are terse.", None),
        ("user", "Hi", None),
        ("assistant", "Hello.", None),
    ]
    # The escaped rendering of imported text.
    html = client_a.get(f"/c/{chats[0]['id']}").get_data(as_text=True)
    assert "<script>alert(1)</script>" not in html


def test_the_import_form_accepts_a_chatgpt_file(multi_app, client_a):
    done = form_import(
        client_a,
        {"file": (io.BytesIO(json.dumps(chatgpt_export()).encode()), "conversations.json")},
    )
    assert done.status_code == 303 and done.headers["Location"].startswith("/c/")


def _broken_chatgpt():
    good = chatgpt_export()
    missing_parent = copy.deepcopy(good)
    missing_parent[1]["mapping"]["a"]["parent"] = "nope"
    cycle = copy.deepcopy(good)
    cycle[1]["mapping"]["r"]["parent"] = "a"
    bad_role = copy.deepcopy(good)
    bad_role[1]["mapping"]["q"]["message"]["author"]["role"] = "wizard"
    bad_parts = copy.deepcopy(good)
    bad_parts[1]["mapping"]["q"]["message"]["content"]["parts"] = "Hello"
    no_mapping = copy.deepcopy(good)
    no_mapping[1]["mapping"] = []
    bad_time = copy.deepcopy(good)
    bad_time[1]["create_time"] = "yesterday"
    return [
        missing_parent,
        cycle,
        bad_role,
        bad_parts,
        no_mapping,
        bad_time,
        [good[0], "not a conversation"],
    ]


def _broken_openwebui():
    good = openwebui_export()
    no_current = copy.deepcopy(good)
    del no_current[0]["chat"]["history"]["currentId"]
    bad_role = copy.deepcopy(good)
    bad_role[1]["chat"]["messages"][1]["role"] = "tool"
    bad_content = copy.deepcopy(good)
    bad_content[1]["chat"]["messages"][1]["content"] = {"text": "x"}
    dangling = copy.deepcopy(good)
    dangling[0]["chat"]["history"]["currentId"] = "m9"
    no_messages = copy.deepcopy(good)
    del no_messages[1]["chat"]["messages"]
    return [no_current, bad_role, bad_content, dangling, no_messages]


@pytest.mark.parametrize("document", _broken_chatgpt() + _broken_openwebui())
def test_a_malformed_conversation_is_left_out_with_why_and_alone_imports_nothing(
    multi_app, client_a, document
):
    """Each file holds one good conversation and one malformed one. Issue 42: the malformed
    one no longer refuses the whole file: it is left out and listed with the reason (as
    the preview says first), and the good one imports. Alone, it imports nothing."""
    job = upload(client_a, document)
    assert job["state"] == "done", job
    assert len(job["result"]["chats"]) == 1 and job["result"]["unreadable"] == 1, job
    (left_out,) = job["result"]["unreadable_chats"]
    assert left_out["reason"]
    assert len(client_a.get("/api/sessions").get_json()["sessions"]) == 1

    alone = upload(client_a, [document[left_out["index"]]])
    assert alone["state"] == "failed", alone
    error = alone["error"]
    assert error["code"] == "invalid_import"
    if isinstance(document[left_out["index"]], dict):  # else the file is no known format
        # The same reason, about the first conversation of its file now.
        assert error["message"] == left_out["reason"].replace(f"[{left_out['index']}]", "[0]", 1)
    assert len(client_a.get("/api/sessions").get_json()["sessions"]) == 1


def test_imported_chats_keep_their_own_times_in_the_list(multi_app, client_a):
    """Issue 25 item 2: an imported chat was last active at its last message, so the
    sidebar files it under its own date, newest first, never all under "Today"."""
    imported = {}
    for document in (openwebui_export(), chatgpt_export()):
        job = upload(client_a, document)
        assert job["state"] == "done", job
        imported.update({c["id"]: c["title"] for c in job["result"]["chats"]})
    listed = client_a.get("/api/sessions").get_json()["sessions"]
    times = {c["id"]: c["updated_at"] for c in listed if c["id"] in imported}
    owui = next(i for i, t in imported.items() if t == "Chart questions")
    # m4, the last message, was written at 1_710_000_030 (2024-03-09T16:00:30Z).
    assert times[owui].startswith("2024-03-09T16:00:30")
    # Every chat whose file gives times keeps them ("Old style" gives none: it is new now).
    dated = {i: t for i, t in times.items() if imported[i] != "Old style"}
    assert len(dated) == len(times) - 1 and all(t < "2025" for t in dated.values()), times
    page = client_a.get("/").get_data(as_text=True)
    assert page.index("March 2024") < page.index("Chart questions"), "filed under its month"
