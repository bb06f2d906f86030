"""Voice: dictation and reading answers aloud through the endpoint the user chose for voice.

    POST /api/audio/transcriptions   multipart `file` (at most NUMI_UPLOAD_MAX_BYTES) -> {text}
    POST /api/audio/speech           {text} -> the audio, as the endpoint answers it
    POST /settings/voice             the Settings → Voice form
    PATCH /api/preferences           {"voice": {endpoint_id, stt_model, tts_model, tts_voice}}
                                     (organising.py hands the `voice` key to `validate`/`save`)

Both audio routes forward to the OpenAI-compatible `/audio/transcriptions` and
`/audio/speech` of the voice endpoint (OpenAI, whisper.cpp's server, speaches, LocalAI) with
the `openai` SDK, through the same adapter (and, for a non-admin's endpoint, the same address
guard) as turns. No audio is stored or logged: the bytes live in this request only.
Without a voice endpoint the speech route answers `voice_off`, and the page reads the
answer with the browser's speechSynthesis instead (static/js/voice.js).
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, g, jsonify, redirect, render_template, request
from flask import url_for

from .. import endpoints as endpoint_store
from ..errors import NotFound, NumiError, invalid
from ..extensions import db
from ..models import User
from ..providers.errors import ProviderError
from .inputs import request_data
from .request_kind import is_htmx

bp = Blueprint("voice", __name__)

DEFAULTS = {"stt_model": "whisper-1", "tts_model": "tts-1", "tts_voice": "alloy"}
VOICE_KINDS = ("openai_chat", "openai_responses")  # the endpoints that speak OpenAI's audio API
MAX_SPEECH_CHARS = 4096  # OpenAI's limit for one speech request
# The containers browsers record into and speech servers read, by their first bytes.
AUDIO_SIGNATURES = (
    (0, b"\x1a\x45\xdf\xa3"),  # WebM / Matroska (Chromium, Firefox)
    (0, b"OggS"),  # Ogg Opus
    (0, b"RIFF"),  # WAV
    (0, b"ID3"),  # MP3 with a tag
    (0, b"\xff\xfb"),  # MP3 frame
    (0, b"\xff\xf3"),
    (0, b"\xff\xf2"),
    (0, b"fLaC"),  # FLAC
    (4, b"ftyp"),  # MP4 / M4A (Safari)
)


def preferences(user: User) -> dict:
    """The user's voice settings with defaults filled in (`endpoint_id` None: no endpoint)."""
    saved = user.voice or {}
    return {
        "endpoint_id": saved.get("endpoint_id"),
        **{k: saved.get(k) or v for k, v in DEFAULTS.items()},
    }


def validate(value) -> dict:
    """Checked voice settings from the API or the form; raises before anything is saved."""
    if not isinstance(value, dict):
        raise invalid("voice must be an object.", "invalid_voice")
    unknown = set(value) - {"endpoint_id", *DEFAULTS}
    if unknown:
        raise invalid(f"Unknown voice setting: {sorted(unknown)[0]}.", "invalid_voice")
    clean = {}
    endpoint_id = value.get("endpoint_id")
    if endpoint_id not in (None, ""):
        try:
            endpoint_id = int(endpoint_id)
        except (TypeError, ValueError):
            raise invalid("endpoint_id must be a number.", "invalid_voice") from None
        endpoint = endpoint_store.get_endpoint(g.user.id, endpoint_id)  # someone else's: 404
        if endpoint.kind not in VOICE_KINDS:
            raise invalid(
                "The voice endpoint must speak OpenAI's API (kind openai_chat or "
                "openai_responses).",
                "invalid_voice",
            )
        clean["endpoint_id"] = endpoint.id
    for key in DEFAULTS:
        text = value.get(key)
        if text is None:
            continue
        if not isinstance(text, str) or len(text.strip()) > 200:
            raise invalid(f"{key} must be text of at most 200 characters.", "invalid_voice")
        if text.strip():
            clean[key] = text.strip()
    return clean


def save(clean: dict) -> dict:
    """Store checked settings (`validate`) as the user's; returns them with defaults."""
    g.user.voice = clean
    db.session.commit()
    return preferences(g.user)


def _adapter():
    """The voice endpoint's adapter, or a clear refusal: none chosen, or gone."""
    chosen = preferences(g.user)
    if chosen["endpoint_id"] is None:
        raise NumiError("voice_off", "No voice endpoint: choose one in Settings → Voice.", 409)
    try:
        endpoint = endpoint_store.get_endpoint(g.user.id, chosen["endpoint_id"])
    except NotFound:
        raise NumiError(
            "voice_endpoint_gone",
            "The voice endpoint was removed: choose another in Settings → Voice.",
            409,
        ) from None
    return endpoint_store.endpoint_adapter(current_app, endpoint), chosen


def _provider_failure(exc) -> NumiError:
    return NumiError(exc.code, f"The voice endpoint failed: {exc.message}", 502)


@bp.post("/api/audio/transcriptions")
def transcribe():
    item = request.files.get("file")
    if item is None:
        raise invalid("Send the recording as the multipart field `file`.", "no_file")
    limit = current_app.config["NUMI_UPLOAD_MAX_BYTES"]
    data = item.stream.read(limit + 1)
    if len(data) > limit:
        raise NumiError(
            "file_too_large",
            f"The recording is larger than {limit // (1024 * 1024) or limit} "
            f"{'MB' if limit >= 1024 * 1024 else 'bytes'}.",
            413,
        )
    declared = (item.mimetype or "").lower()
    known = any(data[at : at + len(magic)] == magic for at, magic in AUDIO_SIGNATURES)
    if not (declared.startswith("audio/") or declared == "video/webm") or not known:
        raise NumiError(
            "audio_type",
            "That is not a recording Numi can send: use WebM, Ogg, WAV, MP3, FLAC or M4A audio.",
            415,
        )
    adapter, chosen = _adapter()
    try:
        text = adapter.transcribe(
            chosen["stt_model"], item.filename or "speech", data, declared or "audio/webm"
        )
    except ProviderError as exc:
        raise _provider_failure(exc) from None
    return jsonify(text=text)


@bp.post("/api/audio/speech")
def speech():
    text = request_data().get("text")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_SPEECH_CHARS:
        raise invalid(
            f"text must be 1 to {MAX_SPEECH_CHARS} characters to read aloud.", "invalid_speech"
        )
    adapter, chosen = _adapter()
    try:
        audio, content_type = adapter.speak(chosen["tts_model"], chosen["tts_voice"], text)
    except ProviderError as exc:
        raise _provider_failure(exc) from None
    if not content_type.startswith("audio/"):
        content_type = "application/octet-stream"
    response = Response(audio, mimetype=content_type)
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.post("/settings/voice")
def voice_settings():
    """The Settings → Voice form."""
    saved = save(
        validate({k: v for k, v in request_data().items() if k in ("endpoint_id", *DEFAULTS)})
    )
    if is_htmx():
        return render_template("partials/_voice_settings.html", saved=True, **voice_context(saved))
    return redirect(url_for("pages.settings", section="voice"))


def voice_context(saved: dict | None = None) -> dict:
    """What the Settings → Voice form shows: the signed-in user's voice settings (`saved`
    when just saved) and the endpoints it offers (those speaking OpenAI's API)."""
    return {
        "voice": preferences(g.user) if saved is None else saved,
        "voice_endpoints": [
            e for e in endpoint_store.list_endpoints(g.user.id) if e.kind in VOICE_KINDS
        ],
    }
