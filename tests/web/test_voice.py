"""Voice through the scripted provider's audio routes and the real openai SDK: dictation
(`POST /api/audio/transcriptions`), read aloud (`POST /api/audio/speech`), the voice
settings in `PATCH /api/preferences`, and every bad input with its stable code: no voice
endpoint, an endpoint gone or failing, audio over the limit or of the wrong type."""

from __future__ import annotations

import io
import logging

import pytest

from numi.testing import Scenario

WEBM = b"\x1a\x45\xdf\xa3" + b"\x00" * 60 + b"MARKER-AUDIO-BYTES"


def add_endpoint(client, scripted, *, kind="openai_chat", name="voice", base=None) -> int:
    """An endpoint on the scripted provider (`base`: another address, for users who may not
    reach loopback)."""
    base = base or (
        scripted.anthropic_base_url if kind == "anthropic" else scripted.openai_base_url
    )
    response = client.post(
        "/api/endpoints",
        json={"name": name, "kind": kind, "base_url": base, "api_key": "k", "default_model": "m"},
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


def choose(client, endpoint_id, **models):
    response = client.patch(
        "/api/preferences", json={"voice": {"endpoint_id": endpoint_id, **models}}
    )
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def dictate(client, data=WEBM, mimetype="audio/webm", filename="speech.webm"):
    return client.post(
        "/api/audio/transcriptions",
        data={"file": (io.BytesIO(data), filename, mimetype)},
        content_type="multipart/form-data",
    )


def code(response) -> str:
    return response.get_json()["error"]["code"]


def test_dictation_and_speech_go_to_the_chosen_voice_endpoint(app, client, scripted, caplog):
    caplog.set_level(logging.DEBUG)
    endpoint = add_endpoint(client, scripted)
    saved = choose(client, endpoint, stt_model="whisper-x", tts_model="tts-x", tts_voice="nova")
    assert saved["voice"] == {
        "endpoint_id": endpoint,
        "stt_model": "whisper-x",
        "tts_model": "tts-x",
        "tts_voice": "nova",
    }
    assert saved["theme"] == "system"  # a voice-only PATCH leaves the theme alone
    assert client.get("/api/preferences").get_json()["voice"]["tts_voice"] == "nova"

    response = dictate(client)
    assert response.status_code == 200
    assert response.get_json() == {"text": f"Scripted transcript of {len(WEBM)} bytes of audio."}
    sent = scripted.last_request
    assert sent.path.endswith("/audio/transcriptions")
    assert sent.body["model"] == "whisper-x" and sent.body["size"] == len(WEBM)
    assert sent.body["content_type"] == "audio/webm"
    scripted.enqueue(Scenario().text("Book a table for two."))
    assert dictate(client).get_json()["text"] == "Book a table for two."

    spoken = client.post("/api/audio/speech", json={"text": "Here is your answer."})
    assert spoken.status_code == 200 and spoken.mimetype == "audio/wav"
    assert spoken.data[:4] == b"RIFF" and spoken.headers["Cache-Control"] == "no-store"
    assert scripted.last_request.body == {
        "model": "tts-x",
        "input": "Here is your answer.",
        "voice": "nova",
    }
    # No audio is kept: not in the log, not as an attachment.
    assert not [r for r in caplog.records if "MARKER-AUDIO" in r.getMessage()]
    from numi.extensions import db
    from numi.models import Attachment

    with app.app_context():
        assert db.session.query(Attachment).count() == 0


def test_without_a_voice_endpoint_both_routes_say_voice_off(client):
    assert code(client.post("/api/audio/speech", json={"text": "Hi"})) == "voice_off"
    response = dictate(client)
    assert response.status_code == 409 and code(response) == "voice_off"
    assert client.get("/api/preferences").get_json()["voice"]["endpoint_id"] is None


def test_a_removed_or_failing_voice_endpoint_is_a_clear_error(client, scripted):
    endpoint = add_endpoint(client, scripted)
    choose(client, endpoint)
    scripted.enqueue(Scenario().http_error(500))
    failed = dictate(client)
    assert failed.status_code == 502 and code(failed).startswith("provider_")
    assert "voice endpoint failed" in failed.get_json()["error"]["message"]
    scripted.enqueue(Scenario().http_error(401, "auth"))
    assert code(client.post("/api/audio/speech", json={"text": "Hi"})) == "provider_auth"

    assert client.delete(f"/api/endpoints/{endpoint}").status_code == 200
    gone = client.post("/api/audio/speech", json={"text": "Hi"})
    assert gone.status_code == 409 and code(gone) == "voice_endpoint_gone"
    assert code(dictate(client)) == "voice_endpoint_gone"


def test_audio_over_the_limit_or_of_a_wrong_type_is_refused(make_app, scripted):
    app = make_app(NUMI_UPLOAD_MAX_BYTES=1000)
    client = app.test_client()
    choose(client, add_endpoint(client, scripted))
    scripted.reset()
    too_big = dictate(client, WEBM + b"\x00" * 1000)
    assert too_big.status_code == 413 and code(too_big) == "file_too_large"
    for data, mimetype in [
        (b"hello, this is text", "text/plain"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 20, "audio/webm"),  # says audio, is not
        (WEBM, "application/pdf"),
    ]:
        refused = dictate(client, data, mimetype)
        assert refused.status_code == 415 and code(refused) == "audio_type", mimetype
    missing = client.post("/api/audio/transcriptions", data={}, content_type="multipart/form-data")
    assert code(missing) == "no_file"
    assert scripted.requests == []  # nothing reached the endpoint
    for text in ["", "   ", "x" * 4097, 5]:
        assert code(client.post("/api/audio/speech", json={"text": text})) == "invalid_speech"


@pytest.mark.parametrize(
    "voice",
    [
        "whisper",
        {"endpoint_id": "abc"},
        {"stt_model": 5},
        {"stt_model": "x" * 201},
        {"speed": 2},
    ],
)
def test_bad_voice_settings_change_nothing(client, scripted, voice):
    endpoint = add_endpoint(client, scripted)
    choose(client, endpoint, tts_voice="nova")
    response = client.patch("/api/preferences", json={"voice": voice, "theme": "dark"})
    assert response.status_code == 400 and code(response) == "invalid_voice"
    after = client.get("/api/preferences").get_json()
    assert after["voice"]["tts_voice"] == "nova" and after["theme"] == "system"


def test_the_voice_endpoint_must_speak_openai_and_be_the_users(
    multi_app, users, client_a, client_b, scripted
):
    public = "https://api.example.com/v1"  # never called: the settings are refused first
    anthropic = add_endpoint(client_a, scripted, kind="anthropic", name="claude", base=public)
    refused = client_a.patch("/api/preferences", json={"voice": {"endpoint_id": anthropic}})
    assert code(refused) == "invalid_voice"
    mine = add_endpoint(client_a, scripted, base=public)
    foreign = client_b.patch("/api/preferences", json={"voice": {"endpoint_id": mine}})
    assert foreign.status_code == 404
    assert client_b.get("/api/preferences").get_json()["voice"]["endpoint_id"] is None


def test_the_settings_form_saves_the_voice(client, scripted):
    endpoint = add_endpoint(client, scripted)
    page = client.get("/settings/voice").get_data(as_text=True)
    assert 'id="voice-settings"' in page and f'value="{endpoint}"' in page
    response = client.post(
        "/settings/voice",
        data={
            "endpoint_id": str(endpoint),
            "stt_model": "small.en",
            "tts_model": "",
            "tts_voice": "af",
        },
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200 and "Saved." in response.get_data(as_text=True)
    voice = client.get("/api/preferences").get_json()["voice"]
    assert voice == {
        "endpoint_id": endpoint,
        "stt_model": "small.en",
        "tts_model": "tts-1",
        "tts_voice": "af",
    }
