"""Conversations through /v1 kept as chats: a request that extends an earlier one's
messages continues its chat, a regeneration and an edit become versions, a changed
system prompt keeps the chat; the chat is marked with the key's name, continuable in the
page, and its usage counted per key. A key that keeps nothing leaves no chat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

from numi.testing import Scenario


def _ask(client, scripted, messages, answer, model="alpha/scripted-model"):
    scripted.enqueue(Scenario().text(answer).usage(7, 3), model=model.split("/", 1)[1])
    done = client.chat.completions.create(model=model, messages=messages)
    return done.choices[0].message.content


def _key_chats(gateway, key_name):
    status, body = gateway.api.get("/api/sessions?limit=500")
    assert status == 200, body
    return [c for c in body["sessions"] if c["api_key"] == key_name]


def _shown(gateway, chat_id):
    return [(m["role"], m["content"]) for m in gateway.api.history(chat_id)]


def test_follow_ups_regenerations_edits_and_system_changes_stay_in_one_chat(gateway, scripted):
    secret, _key_id = gateway.new_key(name="grouping")
    client = gateway.openai(key=secret)
    first = [
        {"role": "system", "content": "Be brief. Today is Monday."},
        {"role": "user", "content": "Name a colour."},
    ]
    a1 = _ask(client, scripted, first, "Blue.")
    follow = first + [{"role": "assistant", "content": a1}, {"role": "user", "content": "Another?"}]
    _ask(client, scripted, follow, "Green.")
    (chat,) = _key_chats(gateway, "grouping")
    assert chat["title"] == "Name a colour."
    assert _shown(gateway, chat["id"]) == [
        ("user", "Name a colour."),
        ("assistant", "Blue."),
        ("user", "Another?"),
        ("assistant", "Green."),
    ]
    # A regeneration resends the same messages: a new version of the last answer.
    _ask(client, scripted, follow, "Red.")
    # An edit changes the last question; the system prompt changed too (a new day).
    edited = (
        [{"role": "system", "content": "Be brief. Today is Tuesday."}]
        + follow[1:3]
        + [{"role": "user", "content": "One more, please?"}]
    )
    _ask(client, scripted, edited, "Yellow.")
    # And the client goes on from the edit.
    _ask(
        client,
        scripted,
        edited
        + [{"role": "assistant", "content": "Yellow."}, {"role": "user", "content": "Thanks"}],
        "Welcome.",
    )
    (same,) = _key_chats(gateway, "grouping")
    assert same["id"] == chat["id"]
    history = gateway.api.history(chat["id"])
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Name a colour."),
        ("assistant", "Blue."),
        ("user", "One more, please?"),
        ("assistant", "Yellow."),
        ("user", "Thanks"),
        ("assistant", "Welcome."),
    ]
    assert history[2]["version"]["m"] == 2  # "Another?" is the edit's other version
    assert same["settings"]["system_prompt"] == "Be brief. Today is Tuesday."
    # Something else entirely is a chat of its own.
    _ask(client, scripted, [{"role": "user", "content": "Unrelated."}], "Sure.")
    assert len(_key_chats(gateway, "grouping")) == 2
    # The answers carry their usage; the Usage page counts them for the key.
    status, usage = gateway.api.get("/api/usage?group=key&period=all")
    assert status == 200, usage
    row = next(r for r in usage["rows"] if r["label"] == "grouping")
    assert (row["answers"], row["input_tokens"], row["output_tokens"]) == (6, 42, 18)
    assert history[-1]["meta"]["usage"]["output_tokens"] == 3


def test_regenerating_the_first_answer_makes_a_version_of_it(gateway, scripted):
    secret, _ = gateway.new_key(name="regen")
    client = gateway.openai(key=secret)
    ask = [{"role": "user", "content": "Pick a number."}]
    _ask(client, scripted, ask, "Seven.")
    _ask(client, scripted, ask, "Three.")
    (chat,) = _key_chats(gateway, "regen")
    history = gateway.api.history(chat["id"])
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Pick a number."),
        ("assistant", "Three."),
    ]
    assert history[1]["version"]["n"] == 2 and history[1]["version"]["m"] == 2


def test_an_anthropic_client_tool_loop_is_one_chat_marked_with_the_key(gateway, scripted):
    secret, _ = gateway.new_key(name="Claude Code")
    client = gateway.anthropic(key=secret)
    scripted.enqueue(Scenario().tool_call("read_file", {"path": "a.txt"}), model="scripted-model")
    ask = [{"role": "user", "content": "What is in a.txt?"}]
    tools = [{"name": "read_file", "input_schema": {"type": "object"}}]
    first = client.messages.create(
        model="beta/scripted-model", max_tokens=100, messages=ask, tools=tools
    )
    call = first.content[-1]
    scripted.enqueue(Scenario().text("It says hello."), model="scripted-model")
    client.messages.create(
        model="beta/scripted-model",
        max_tokens=100,
        tools=tools,
        messages=ask
        + [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "hello"}],
            },
        ],
    )
    (chat,) = _key_chats(gateway, "Claude Code")
    roles = [m["role"] for m in gateway.api.history(chat["id"])]
    assert roles == ["user", "assistant", "tool", "assistant"]
    # The sidebar names the key beside the chat.
    request = urllib.request.Request(
        gateway.server.url + f"/c/{chat['id']}", headers=gateway.api.auth
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        html = response.read().decode()
    assert 'class="chat-tag api-key-tag"' in html and "Claude Code</span>" in html


def test_a_key_that_keeps_nothing_leaves_no_chat_but_counts_its_usage(gateway, scripted):
    secret, _ = gateway.new_key(name="ephemeral", keep=False)
    _ask(gateway.openai(key=secret), scripted, [{"role": "user", "content": "Hi"}], "Hello.")
    assert _key_chats(gateway, "ephemeral") == []
    status, usage = gateway.api.get("/api/usage?group=key&period=all")
    row = next(r for r in usage["rows"] if r["label"] == "ephemeral")
    assert (row["answers"], row["output_tokens"]) == (1, 3)
    status, by_model = gateway.api.get("/api/usage?group=model&period=all")
    assert any(r["label"] == "scripted-model" and r["answers"] >= 1 for r in by_model["rows"])


def test_the_llm_cli_prompt_and_its_follow_up_land_in_one_kept_chat(
    gateway, scripted, tmp_path, require_extra
):
    """simonw's `llm`, a client nobody here wrote, configured through its
    extra-openai-models.yaml as its documentation says."""
    require_extra("llm", "test")
    secret, _ = gateway.new_key(name="llm cli")
    (tmp_path / "extra-openai-models.yaml").write_text(
        "- model_id: numi\n"
        "  model_name: alpha/scripted-model\n"
        f'  api_base: "{gateway.openai_base}"\n'
        "  api_key_name: numi\n"
    )
    (tmp_path / "keys.json").write_text(json.dumps({"numi": secret}))
    env = {**os.environ, "LLM_USER_PATH": str(tmp_path), "LLM_LOAD_PLUGINS": ""}
    llm = [sys.executable, "-m", "llm"]
    scripted.enqueue(Scenario().text("Paris.", chunks=2), model="scripted-model")
    first = subprocess.run(
        [*llm, "-m", "numi", "Capital of France?"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "Paris."
    scripted.enqueue(Scenario().text("Berlin."), model="scripted-model")
    follow = subprocess.run(
        [*llm, "-c", "And Germany?"], env=env, capture_output=True, text=True, timeout=60
    )
    assert follow.returncode == 0, follow.stderr
    assert follow.stdout.strip() == "Berlin."
    (chat,) = _key_chats(gateway, "llm cli")
    assert _shown(gateway, chat["id"]) == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "And Germany?"),
        ("assistant", "Berlin."),
    ]


def test_a_project_name_uses_its_route_fallbacks_and_instructions_and_keeps_the_chat_there(
    gateway, scripted
):
    status, project = gateway.api.post(
        "/api/projects",
        {
            "name": "Essays",
            "instructions": "Answer in French.",
            "settings": {
                "endpoint_id": gateway.beta["id"],
                "model": "scripted-model",
                "fallbacks": [{"endpoint_id": gateway.alpha["id"], "model": "scripted-reasoning"}],
            },
        },
    )
    assert status == 201, project
    secret, _ = gateway.new_key(
        name="essays", projects=[project["id"]], endpoints=[gateway.beta["id"], gateway.alpha["id"]]
    )
    client = gateway.openai(key=secret)
    assert "project/Essays" in [m.id for m in client.models.list()]
    scripted.enqueue(Scenario.http_error(401), model="scripted-model")
    scripted.enqueue(Scenario().text("Bonjour."), model="scripted-reasoning")
    done = client.chat.completions.create(
        model="project/Essays", messages=[{"role": "user", "content": "Hi"}]
    )
    assert (
        done.choices[0].message.content == "Bonjour." and done.model == "alpha/scripted-reasoning"
    )
    assert scripted.requests[-2].body["system"].endswith("Answer in French.")  # beta, Anthropic
    assert "Answer in French." in scripted.last_request.body["messages"][0]["content"]
    (chat,) = _key_chats(gateway, "essays")
    assert chat["project_id"] == project["id"]
