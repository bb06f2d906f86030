"""Regenerate's model picker, one per answer, carries only its chosen model (issue 43): the
other options are sent once per page in a `<template>` that picker.js copies in when the
menu opens (the browser side: tests/browser/test_model_picker.py). A page of 50 messages
on an endpoint of 100 models carried 25 copies of every option."""

from __future__ import annotations

import re

MODELS = [{"id": f"model-{n:03d}", "context_window": 131072} for n in range(100)]


def chat_of_50_messages(app, client) -> tuple[str, int]:
    """A chat of 25 questions and answers on an endpoint listing 100 models."""
    from numi.extensions import db
    from numi.models import Endpoint, Message, utcnow

    endpoint = client.post(
        "/api/endpoints",
        json={"name": "many", "kind": "openai_chat", "base_url": "http://127.0.0.1:9/v1"},
    ).json
    with app.app_context():
        row = db.session.get(Endpoint, endpoint["id"])
        row.models, row.models_fetched_at, row.models_problem = MODELS, utcnow(), None
        db.session.commit()
    chat = client.post(
        "/api/session", json={"endpoint_id": endpoint["id"], "model": "model-042"}
    ).get_json()
    with app.app_context():
        for n in range(25):
            db.session.add(Message(chat_id=chat["id"], role="user", content=f"Question {n}"))
            db.session.flush()
            db.session.add(
                Message(
                    chat_id=chat["id"],
                    role="assistant",
                    content=f"Answer {n}",
                    meta={"model": "model-042"},
                )
            )
            db.session.flush()
        db.session.commit()
    return chat["id"], endpoint["id"]


def test_a_page_of_answers_sends_the_models_once(sqlite_app, sqlite_client):
    chat_id, endpoint_id = chat_of_50_messages(sqlite_app, sqlite_client)
    page = sqlite_client.get(f"/c/{chat_id}").get_data(as_text=True)
    assert page.count('class="msg msg-assistant') == 25

    forms = re.findall(r'<form[^>]*class="inline action-regenerate".*?</form>', page, re.S)
    assert len(forms) == 25
    chosen = f'<option value="{endpoint_id}:model-042" data-model="model-042" selected>'
    options_ids = set()
    for form in forms:
        # Each holds its chosen model only, and names the options it gets when opened (the
        # page's first carries the templates beside its select).
        form = re.sub(r"<template.*?</template>", "", form, flags=re.S)
        assert form.count("<option") == 1 and chosen in form
        options_ids |= set(re.findall(r'data-options="([^"]+)"', form))
    (options_id,) = options_ids
    templates = re.findall(rf'<template id="{options_id}">(.*?)</template>', page, re.S)
    assert len(templates) == 1
    listed = re.findall(r'<option value="([^"]+)"', templates[0])
    assert listed == [f"{endpoint_id}:{m['id']}" for m in MODELS]
    assert " selected" not in templates[0]  # the select keeps its own chosen option
    # The header's picker (no script needed to switch the chat's model) keeps them all.
    header = re.search(r'<select name="route"[^>]*id="[^"]*".*?</select>', page, re.S).group(0)
    assert header.count("<option") == 100
