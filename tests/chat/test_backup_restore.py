"""A backup restores (issue 24): a chat whose Settings panel was saved (its empty fields
stored as null) takes its own settings back, by PATCH and by import; `numi export --all`
then an import into a fresh data directory and database restores every chat. Both
databases; the real `numi` command for the export."""

from __future__ import annotations

import json
import os

from numi.chat.chats import validate_settings
from numi.chat.importer import DROPPED_SETTINGS
from fixtures.databases import _build_app, _database
from import_support import run_import
from server_wait import HANG_SECONDS

LIMITS = {"NUMI_MAX_SYSTEM_PROMPT_CHARS": 50_000}


def _saved_by_the_settings_panel(client, title: str, **form) -> dict:
    chat = client.post("/api/session", json={"title": title}).get_json()
    fields = {
        "system_prompt": "",
        "temperature": "",
        "max_tokens": "",
        "reasoning_effort": "",  # "default" in the panel
        "tools_shown": "1",
        **form,
    }
    response = client.post(f"/c/{chat['id']}/settings", data=fields)
    assert response.status_code in (200, 302, 303), response.get_data(as_text=True)
    return client.get(f"/api/session/{chat['id']}").get_json()


def _comparable(chats: list[dict]) -> list[tuple[str, str]]:
    """Title and settings; an import never brings tools, a workspace or approvals (a file
    must not grant them), so those are left out."""
    return sorted(
        (
            chat["title"],
            json.dumps(
                {k: v for k, v in chat["settings"].items() if k not in DROPPED_SETTINGS},
                sort_keys=True,
            ),
        )
        for chat in chats
    )


def test_settings_as_stored_are_accepted_back():
    for raw in (
        {"reasoning_effort": ""},
        {"reasoning_effort": "high", "temperature": "0.3", "max_tokens": "100"},
        {"temperature": "", "max_tokens": "", "workspace": "", "system_prompt": None},
    ):
        stored = validate_settings(raw, LIMITS)
        assert validate_settings(stored, LIMITS) == stored, raw


def test_a_chat_takes_its_own_saved_settings_back(app, client):
    chat = _saved_by_the_settings_panel(client, "Saved", system_prompt="Be brief", tools="x")
    assert chat["settings"]["reasoning_effort"] is None, "the panel's empty value, stored"
    response = client.patch(f"/api/session/{chat['id']}", json={"settings": chat["settings"]})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["settings"] == chat["settings"]


def test_export_all_then_import_into_a_fresh_install_restores_every_chat(
    app, client, backend, tmp_path, database_templates, cli_host
):
    saved = [
        _saved_by_the_settings_panel(client, "Panel saved"),
        _saved_by_the_settings_panel(
            client, "Every field", system_prompt="Be brief", temperature="0.4", max_tokens="50"
        ),
        _saved_by_the_settings_panel(
            client, "Effort", reasoning_effort="low", tools="current_time"
        ),
        client.post("/api/session", json={"title": "Never opened"}).get_json(),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMI_")}
    env.update(
        NUMI_DATA_DIR=app.config["NUMI_DATA_DIR"],
        NUMI_DATABASE_URL=app.config["NUMI_DATABASE_URL"],
        NUMI_SECRET_KEY=app.config["NUMI_SECRET_KEY"],
        NUMI_AUTO_ENDPOINTS="0",
    )
    backup = tmp_path / "backup"
    result = cli_host.run(
        ["export", "--all", str(backup)], env=env, input=None, timeout=HANG_SECONDS
    )
    assert result.returncode == 0, result.stderr
    assert f"Exported {len(saved)} chats" in result.stdout
    files = sorted(backup.rglob("*.json"))
    assert len(files) == len(saved)

    fresh_url, drop = _database(backend, tmp_path / "fresh", database_templates)
    try:
        fresh = _build_app(fresh_url, tmp_path / "fresh-data", {})
        restore = fresh.test_client()
        for path in files:
            job = run_import(restore, json=json.loads(path.read_text("utf-8")))
            assert job["state"] == "done", (path.name, job)
        restored = restore.get("/api/sessions?limit=100").get_json()["sessions"]
        assert _comparable(restored) == _comparable(saved)
        with fresh.app_context():
            from numi.extensions import db

            db.session.remove()
            db.engine.dispose()
    finally:
        drop()
