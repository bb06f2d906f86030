"""First-start discovery of endpoints: OPENAI_*/ANTHROPIC_* variables and a local Ollama.

Apart from `numi.endpoints` because only `numi serve`'s first start uses it, and it makes the
one connection a start may make on its own (Ollama's /api/version, half a second at most).
"""

from __future__ import annotations

import logging
import os
import urllib.request
from typing import Any

from sqlalchemy import select

from .endpoints import create_endpoint
from .errors import NumiError
from .extensions import db
from .models import Endpoint

log = logging.getLogger(__name__)

OLLAMA_URL = "http://127.0.0.1:11434"


def detect_from_environment(environ=None) -> list[Endpoint]:
    """First-start discovery: endpoints from OPENAI_*/ANTHROPIC_* variables and a local Ollama.

    Runs only while no endpoint has ever been added, so a user's removal sticks.
    """
    environ = os.environ if environ is None else environ
    if db.session.execute(select(Endpoint.id).limit(1)).first() is not None:
        return []
    found: list[dict[str, Any]] = []
    if environ.get("OPENAI_API_KEY") or environ.get("OPENAI_BASE_URL"):
        found.append(
            {
                "name": "OpenAI",
                "kind": "openai_chat",
                "base_url": environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
                "api_key": environ.get("OPENAI_API_KEY"),
            }
        )
    if environ.get("ANTHROPIC_API_KEY"):
        found.append(
            {
                "name": "Anthropic",
                "kind": "anthropic",
                "base_url": environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com",
                "api_key": environ["ANTHROPIC_API_KEY"],
            }
        )
    if _ollama_answers():
        found.append({"name": "Ollama", "kind": "openai_chat", "base_url": OLLAMA_URL + "/v1"})
    created = []
    for fields in found:
        try:
            created.append(create_endpoint(None, fields))
        except NumiError as exc:
            log.warning("skipped auto-detected endpoint %s: %s", fields["name"], exc.message)
    return created


def _ollama_answers() -> bool:
    try:
        with urllib.request.urlopen(OLLAMA_URL + "/api/version", timeout=0.5) as response:
            return response.status == 200
    except OSError:
        return False
