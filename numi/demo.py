"""The demo endpoint of `numi serve --demo`: the scripted provider as the shared endpoint
"Demo (scripted)", which exists only while a demo server runs.

The provider lives in the serving process, so once that process ends the endpoint points
at nothing: every send would fail after a timeout, and as the first endpoint by name it
would be new chats' default. So it is removed (soft-deleted) when the demo stops and when
any `numi serve` starts without `--demo` (a demo killed without a clean stop), and brought
back, the same row with its chats, by the next `--demo`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from .endpoints import create_endpoint, fetch_models, find_by_name, update_endpoint
from .extensions import db
from .models import Endpoint, utcnow

if TYPE_CHECKING:  # imported lazily: `numi` imports this module before it monkey-patches
    from flask import Flask

    from .models import Endpoint

DEMO_ENDPOINT = "Demo (scripted)"
DEMO_TOKENS_PER_SECOND = 40.0  # slow enough to watch the answer stream in
# The scripted provider listens on loopback; an endpoint a user named so but pointed
# elsewhere is theirs and stays.
DEMO_URL_PREFIX = "http://127.0.0.1:"


def start_demo(app: "Flask"):
    """Run the scripted provider on a free loopback port and point the demo endpoint at it
    (made on the first demo start, brought back and its URL updated on later ones).
    Returns the provider; `stop_demo` ends both."""
    # The scripted provider is for --demo only, and every `numi` command imports this module.
    from .testing.demo import demo_scenario  # lazy: start-up time
    from .testing.server import ScriptedProvider  # lazy: start-up time

    provider = ScriptedProvider(default_scenario=demo_scenario(DEMO_TOKENS_PER_SECOND)).start()
    with app.app_context():
        existing = find_by_name(None, DEMO_ENDPOINT) or _removed_demo_endpoint()
        if existing is None:
            existing = create_endpoint(
                None,
                {
                    "name": DEMO_ENDPOINT,
                    "kind": "openai_chat",
                    "base_url": provider.openai_base_url,
                    "default_model": "scripted-model",
                },
            )
        else:
            existing.deleted_at = None
            update_endpoint(existing, {"base_url": provider.openai_base_url, "enabled": True})
        # Its whole list, as for any endpoint added (the pickers offer every model); a new
        # port is another server's list.
        fetch_models(existing)
        db.session.remove()
    return provider


def stop_demo(app: "Flask", provider) -> None:
    """Stop the scripted provider and remove the endpoint that pointed at it."""
    provider.stop()
    hide_demo_endpoint(app)


def hide_demo_endpoint(app: "Flask") -> bool:
    """Remove the demo endpoint left by an earlier `--demo` (none runs now); returns
    whether there was one."""
    with app.app_context():
        found = find_by_name(None, DEMO_ENDPOINT)
        if found is None or not found.base_url.startswith(DEMO_URL_PREFIX):
            db.session.remove()
            return False
        found.deleted_at = utcnow()
        db.session.commit()
        db.session.remove()
    return True


def _removed_demo_endpoint() -> "Endpoint | None":
    removed = db.session.execute(
        select(Endpoint)
        .where(
            Endpoint.name == DEMO_ENDPOINT,
            Endpoint.user_id.is_(None),
            Endpoint.deleted_at.is_not(None),
        )
        .order_by(Endpoint.id.desc())
    ).scalars()
    # base_url is stored sealed (its credentials encrypted): compared here, not in SQL.
    return next((e for e in removed if e.base_url.startswith(DEMO_URL_PREFIX)), None)
