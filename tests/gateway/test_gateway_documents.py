"""A project's documents on /v1: a call to `project/<name>` carries the passages of the
project's files that answer its newest question, as a chat of the project does in the
page, and never another user's. Two users of a live multi-user `numi serve` each have a
project named "Kitchen" with a file of their own; the official openai SDK asks, and the
scripted provider records what the endpoint was sent."""

from __future__ import annotations

import pytest

from numi.testing import Scenario
from turn_support import Api, turn_server_env, upload, wait_until

MANUALS = {
    "alice": b"# Espresso machine\n\n## Descaling\n\n"
    b"Descale the boiler every 200 shots with citric acid dissolved in warm water.\n",
    "bob": b"# Espresso machine\n\n## Descaling\n\n"
    b"Descale the boiler every 90 shots with white vinegar and rinse twice.\n",
}
PASSAGES = {
    "alice": "Descale the boiler every 200 shots with citric acid",
    "bob": "Descale the boiler every 90 shots with white vinegar",
}
QUESTION = "How often should I descale the boiler?"


@pytest.fixture(scope="module")
def kitchens(live_server_factory, provider):
    """Per user: an Api, a key, and the project "Kitchen" with their manual, indexed."""
    server = live_server_factory(NUMI_AUTH="multi", **turn_server_env())
    users = {}
    for name in ("alice", "bob"):
        # Admins: the scripted provider listens on a loopback address.
        server.cli(
            "user", "create", name, "--admin", "--password-stdin", input="long enough password\n"
        )
        token = server.cli("token", "create", "--user", name).stdout.strip()
        api = Api(server.url, token=token)
        status, endpoint = api.post(
            "/api/endpoints",
            {
                "name": "alpha",
                "kind": "openai_chat",
                "base_url": provider.openai_base_url,
                "api_key": "k",
                "default_model": "scripted-model",
            },
        )
        assert status == 201, endpoint
        status, project = api.post(
            "/api/projects",
            {
                "name": "Kitchen",
                "settings": {"endpoint_id": endpoint["id"], "model": "scripted-model"},
            },
        )
        assert status == 201, project
        status, uploaded = upload(
            server.url, "manual.md", MANUALS[name], "text/markdown", token=token
        )
        assert status == 201, uploaded
        status, added = api.post(
            f"/api/projects/{project['id']}/files",
            {"attachment_id": uploaded["attachments"][0]["id"]},
        )
        assert status == 201, added

        def indexed(api=api):
            documents = api.get("/api/documents")[1]["documents"]
            return all(d["status"] == "done" for d in documents) or None

        wait_until(indexed, timeout=60, what=f"{name}'s manual to be indexed")
        status, key = api.post("/api/keys", {"name": "Zed"})
        assert status == 201, key
        users[name] = {"api": api, "secret": key["secret"], "project": project}
    yield server, users
    server.stop()


def _system(body: dict) -> str:
    return "\n\n".join(m["content"] for m in body["messages"] if m["role"] == "system")


def _ask(server, secret: str, scripted, model: str = "project/Kitchen") -> str:
    import openai

    client = openai.OpenAI(base_url=server.url + "/v1", api_key=secret, max_retries=0)
    scripted.enqueue(Scenario().text("Every so often [1]."), model="scripted-model")
    stream = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": QUESTION},
        ],
        stream=True,
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == (
        "Every so often [1]."
    )
    return _system(scripted.last_request.body)


def test_a_project_call_carries_its_own_users_passage_and_never_anothers(kitchens, scripted):
    server, users = kitchens
    for name, other in (("alice", "bob"), ("bob", "alice")):
        system = _ask(server, users[name]["secret"], scripted)
        assert PASSAGES[name] in system, name
        assert "[1] manual.md › Espresso machine › Descaling" in system
        assert PASSAGES[other] not in system, f"{other}'s document reached {name}'s call"
        # The client's own system prompt is still there, after the project's context.
        assert system.endswith("Answer briefly.")


def test_a_model_outside_the_project_and_never_carry_no_passage(kitchens, scripted):
    server, users = kitchens
    alice = users["alice"]
    assert PASSAGES["alice"] not in _ask(
        server, alice["secret"], scripted, model="alpha/scripted-model"
    )
    project_id = alice["project"]["id"]
    status, changed = alice["api"].call(
        "PATCH", f"/api/projects/{project_id}", {"settings": {"use_documents": "never"}}
    )
    assert status == 200, changed
    try:
        assert PASSAGES["alice"] not in _ask(server, alice["secret"], scripted)
    finally:
        alice["api"].call(
            "PATCH", f"/api/projects/{project_id}", {"settings": {"use_documents": "auto"}}
        )
    assert PASSAGES["alice"] in _ask(server, alice["secret"], scripted)
