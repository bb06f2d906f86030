"""Saved prompts through the JSON API, the Settings forms, the export file and the import;
every query scoped to its owner; bad input answers a stable code and saves nothing. Runs on
SQLite and PostgreSQL (the `client` fixtures are parametrised over `database_url`)."""

from __future__ import annotations

import json
import re
from io import BytesIO

import pytest
from import_support import form_import, run_import

SUMMARY = {
    "command": "summarize",
    "title": "Summarize",
    "text": "Summarize in three bullets:\n\n{{input}}",
}


def create(client, **fields) -> dict:
    response = client.post("/api/prompts", json={**SUMMARY, **fields})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def listed(client) -> list[tuple[str, str, str]]:
    response = client.get("/api/prompts")
    assert response.status_code == 200
    return [(p["command"], p["title"], p["text"]) for p in response.get_json()["prompts"]]


def test_create_list_get_patch_delete(client):
    made = create(client, command="/summarize", title="  Summarize   it ")
    assert (
        made["command"] == "summarize" and made["title"] == "Summarize it"
    )  # "/" dropped, spaces tidied
    create(client, command="ask_2", title="Ask", text="Explain {{clipboard}} simply")
    assert [c for c, _, _ in listed(client)] == ["ask_2", "summarize"]  # sorted by command

    got = client.get(f"/api/prompts/{made['id']}").get_json()
    assert got["text"] == SUMMARY["text"] and got["created_at"].endswith("Z")
    patched = client.patch(f"/api/prompts/{made['id']}", json={"title": "Sum up"})
    assert patched.status_code == 200
    assert (patched.get_json()["title"], patched.get_json()["command"]) == ("Sum up", "summarize")
    patched = client.patch(
        f"/api/prompts/{made['id']}", json={"command": "sum", "text": "Short: {{input}}"}
    )
    assert (patched.get_json()["command"], patched.get_json()["text"]) == (
        "sum",
        "Short: {{input}}",
    )

    assert client.delete(f"/api/prompts/{made['id']}").status_code == 204
    assert client.get(f"/api/prompts/{made['id']}").status_code == 404
    assert [c for c, _, _ in listed(client)] == ["ask_2"]


@pytest.mark.parametrize(
    "fields, code, status",
    [
        ({"command": "Summarize"}, "invalid_command", 400),
        ({"command": "two words"}, "invalid_command", 400),
        ({"command": ""}, "invalid_command", 400),
        ({"command": "x" * 33}, "invalid_command", 400),
        ({"command": "émoji"}, "invalid_command", 400),
        ({"command": 7}, "invalid_command", 400),
        ({"title": " "}, "invalid_title", 400),
        ({"title": "t" * 101}, "invalid_title", 400),
        ({"text": "   "}, "invalid_text", 400),
        ({"text": "x" * 10_001}, "invalid_text", 400),
        ({"text": None}, "invalid_text", 400),
        ({"command": "taken"}, "command_taken", 409),
    ],
)
def test_bad_input_answers_a_stable_code_and_saves_nothing(client, fields, code, status):
    create(client, command="taken")
    before = listed(client)
    response = client.post("/api/prompts", json={**SUMMARY, **fields})
    assert response.status_code == status and response.get_json()["error"]["code"] == code
    # The same check on an edit: nothing of the prompt changes.
    other = create(client, command="other")
    patched = client.patch(f"/api/prompts/{other['id']}", json={"title": "New title", **fields})
    assert patched.status_code == status and patched.get_json()["error"]["code"] == code
    assert listed(client) == sorted(before + [("other", SUMMARY["title"], SUMMARY["text"])])
    assert client.post("/api/prompts", json=["not", "an", "object"]).status_code == 400


def test_prompts_are_scoped_to_their_owner(client_a, client_b):
    mine = create(client_a)
    create(client_b, text="Bob's summary")  # the same command for another user is fine
    assert len(listed(client_a)) == len(listed(client_b)) == 1
    for method in ("get", "patch", "delete"):
        response = getattr(client_b, method)(f"/api/prompts/{mine['id']}", json={"title": "stolen"})
        assert response.status_code == 404 and response.get_json()["error"]["code"] == "not_found"
    assert client_b.post(f"/settings/prompts/{mine['id']}/delete").status_code == 404
    assert (
        client_b.post(
            f"/settings/prompts/{mine['id']}", data={**SUMMARY, "title": "stolen"}
        ).status_code
        == 404
    )
    assert listed(client_a) == [("summarize", "Summarize", SUMMARY["text"])]
    assert [p["text"] for p in client_b.get("/api/prompts/export").get_json()["prompts"]] == [
        "Bob's summary"
    ]
    # Alice's prompts are in her composer only.
    chat = client_b.post("/api/session", json={"title": "b's"}).get_json()
    create(client_b, command="bobs-own", text="Bob's text")
    page = client_b.get(f"/c/{chat['id']}").get_data(as_text=True)
    assert 'data-command="bobs-own"' in page and f'id="prompt-option-{mine["id"]}"' not in page


def test_settings_forms_add_edit_delete_and_show_errors_next_to_the_form(client):
    hx = {"HX-Request": "true"}
    added = client.post("/settings/prompts", data={**SUMMARY}, headers=hx)
    html = added.get_data(as_text=True)
    assert added.status_code == 200 and html.startswith('<div id="prompts-section"')
    assert "/summarize" in html and "Summarize in three bullets" in html
    prompt_id = client.get("/api/prompts").get_json()["prompts"][0]["id"]

    # A refused add: the error is shown by the Add form, what was typed is kept, nothing saved.
    refused = client.post(
        "/settings/prompts", data={**SUMMARY, "command": "Bad Command"}, headers=hx
    )
    html = refused.get_data(as_text=True)
    assert (
        refused.status_code == 400
        and 'data-code="invalid_command"' in html
        and 'value="Bad Command"' in html
    )
    taken = client.post("/settings/prompts", data={**SUMMARY, "title": "again"}, headers=hx)
    assert taken.status_code == 409 and 'data-code="command_taken"' in taken.get_data(as_text=True)
    assert len(listed(client)) == 1

    edited = client.post(
        f"/settings/prompts/{prompt_id}", data={**SUMMARY, "title": "Sum up"}, headers=hx
    )
    assert edited.status_code == 200 and "Sum up" in edited.get_data(as_text=True)
    # A refused edit reopens that prompt's form with the error.
    bad = client.post(f"/settings/prompts/{prompt_id}", data={**SUMMARY, "text": " "}, headers=hx)
    assert bad.status_code == 400
    assert re.search(
        r'<details class="prompt-edit" open>\s*<summary>Edit', bad.get_data(as_text=True)
    )
    assert listed(client)[0][1] == "Sum up"

    # Without JavaScript: a redirect back to Settings → Prompts, or the page with the error.
    plain = client.post(f"/settings/prompts/{prompt_id}/delete")
    assert plain.status_code == 302 and plain.headers["Location"].endswith("/settings/prompts")
    assert listed(client) == []
    page = client.post("/settings/prompts", data={**SUMMARY, "title": ""})
    assert page.status_code == 400 and 'data-code="invalid_title"' in page.get_data(as_text=True)
    assert "<h1>Settings</h1>" in page.get_data(as_text=True)


def test_prompt_text_is_escaped_where_it_renders(client, xss):
    """Untrusted title and text never add an element or an attribute to Settings or the
    chat page (where the `/` list carries the text in data-text)."""
    prompt = create(client, command="evil", title="plain", text="plain {{input}}")
    chat = client.post("/api/session", json={"title": "t"}).get_json()
    pages = ("/settings/prompts", f"/c/{chat['id']}")
    baseline = [xss.page_outline(client.get(path).get_data(as_text=True))[0] for path in pages]
    for hostile in xss.inputs:
        title = hostile.strip()[:100] or "x"
        assert (
            client.patch(
                f"/api/prompts/{prompt['id']}", json={"title": title, "text": hostile}
            ).status_code
            == 200
        )
        for path, outline in zip(pages, baseline):
            html = client.get(path).get_data(as_text=True)
            assert xss.page_outline(html)[0] == outline, (path, hostile)
            assert "<img src=x onerror" not in html and "<script>alert" not in html


def test_export_and_import_round_trip_without_clobbering(client_a, client_b):
    create(client_a)
    create(
        client_a, command="translate", title="Translate", text="Translate to French: {{clipboard}}"
    )
    exported = client_a.get("/api/prompts/export")
    assert exported.status_code == 200 and "attachment" in exported.headers["Content-Disposition"]
    document = json.loads(exported.get_data(as_text=True))
    assert document["format"] == "numi.prompts" and len(document["prompts"]) == 2

    # Into an account that already has a different /summarize: kept as summarize-2.
    create(client_b, text="Bob's own summary")
    job = run_import(
        client_b,
        data={"file": (BytesIO(exported.get_data()), "numi-prompts.json")},
        content_type="multipart/form-data",
    )
    assert job["state"] == "done", job
    body = job["result"]
    assert body["renamed"] == {"summarize": "summarize-2"} and body["skipped"] == []
    assert listed(client_b) == [
        ("summarize", "Summarize", "Bob's own summary"),
        ("summarize-2", "Summarize", SUMMARY["text"]),
        ("translate", "Translate", "Translate to French: {{clipboard}}"),
    ]
    # Lossless: the imported prompts are the exported ones (times included).
    theirs = {p["command"]: p for p in client_b.get("/api/prompts").get_json()["prompts"]}
    for original in document["prompts"]:
        copy = theirs[body["renamed"].get(original["command"], original["command"])]
        assert {k: copy[k] for k in original if k != "command"} == {
            k: v for k, v in original.items() if k != "command"
        }

    # A second import of the same file changes nothing (identical prompts are skipped).
    again = run_import(client_b, json=document)["result"]
    assert again["prompts"] == [] and sorted(again["skipped"]) == ["summarize", "translate"]
    assert len(listed(client_b)) == 3
    # Through the Settings Import form: back to the prompts.
    form = form_import(client_a, {"file": (BytesIO(exported.get_data()), "p.json")})
    assert form.status_code == 303 and form.headers["Location"].endswith("/settings/prompts")

    # A malformed file is refused whole: nothing is added.
    bad = {
        **document,
        "prompts": [*document["prompts"], {"command": "Nope!", "title": "t", "text": "x"}],
    }
    bad["prompts"][0] = {**bad["prompts"][0], "command": "fresh"}
    refused = run_import(client_b, json=bad)
    assert refused["state"] == "failed" and refused["error"]["code"] == "invalid_import"
    assert "prompts[2]" in refused["error"]["message"]
    assert len(listed(client_b)) == 3
    future = {"format": "numi.prompts", "version": 9, "prompts": []}
    assert run_import(client_b, json=future)["state"] == "failed"


def test_cli_export_all_writes_each_users_prompts(app, client, numi_cli, tmp_path):
    create(client)
    out = tmp_path / "backup"
    env = {"NUMI_DATABASE_URL": app.config["NUMI_DATABASE_URL"]}
    result, _ = numi_cli("export", "--all", str(out), **env)
    assert result.returncode == 0, result.stderr
    files = list(out.glob("*/prompts.json"))
    assert len(files) == 1
    document = json.loads(files[0].read_text())
    assert [p["command"] for p in document["prompts"]] == ["summarize"]


def test_a_user_keeps_at_most_max_prompts(client):
    from numi.prompts import MAX_PROMPTS

    document = {
        "format": "numi.prompts",
        "version": 1,
        "prompts": [
            {"command": f"p{i}", "title": f"P {i}", "text": "t"} for i in range(MAX_PROMPTS + 1)
        ],
    }
    refused = run_import(client, json=document)
    assert refused["state"] == "failed" and refused["error"]["code"] == "too_many_prompts"
    assert listed(client) == []
    document["prompts"].pop()
    assert run_import(client, json=document)["state"] == "done"
    one_more = client.post("/api/prompts", json=SUMMARY)
    assert (
        one_more.status_code == 400 and one_more.get_json()["error"]["code"] == "too_many_prompts"
    )
    assert len(listed(client)) == MAX_PROMPTS
