"""The scripted provider's audio routes, as OpenAI speaks them:

- `POST /v1/audio/transcriptions` (multipart: `file`, `model`, optional `language`,
  `response_format`) answers `{"text": ...}`: the text of the next enqueued scenario
  (`Scenario().text("…")`), else "Scripted transcript of N bytes of audio.".
- `POST /v1/audio/speech` (JSON: `model`, `input`, `voice`, `response_format`) answers a
  short WAV tone, longer for longer input (at most two seconds).

An enqueued scenario with `http_error(...)` answers the error instead, in OpenAI's shape.
The recorded request's body is the form fields with the file's `filename`, `content_type`
and `size` (not its bytes), or the JSON body.
"""

from __future__ import annotations

import io
import math
import struct
import wave
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from .scenario import Text

ROUTES = ("/audio/transcriptions", "/audio/speech")
SAMPLE_RATE = 8000


def parse_multipart(content_type: str, raw: bytes) -> tuple[dict[str, Any], bytes | None]:
    """The form fields of a multipart body, and the bytes of its `file` part (or None)."""
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
    )
    fields: dict[str, Any] = {}
    data = None
    if not message.is_multipart():
        return fields, None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if name == "file":
            data = payload
            fields["filename"] = part.get_filename()
            fields["content_type"] = part.get_content_type()
            fields["size"] = len(payload)
        elif name:
            fields[name] = payload.decode("utf-8", "replace")
    return fields, data


def transcript_text(scenario, audio: bytes | None) -> str:
    """The transcript an enqueued scenario scripts, or the default one."""
    if scenario is not None:
        text = "".join(step.text for step in scenario.steps if isinstance(step, Text))
        if text:
            return text
    return f"Scripted transcript of {len(audio or b'')} bytes of audio."


def speech_wav(text: str) -> bytes:
    """A WAV tone (440 Hz, 8 kHz mono, 16 bit) as long as `text` would take to say,
    at most two seconds."""
    seconds = min(2.0, 0.2 + 0.03 * len(text))
    frames = int(SAMPLE_RATE * seconds)
    samples = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / SAMPLE_RATE)))
        for i in range(frames)
    )
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(samples)
    return out.getvalue()
