"""The `pages` blueprint every page module registers on, and what several pages share."""

from __future__ import annotations

from flask import Blueprint, current_app

from ...extensions import turn_manager

bp = Blueprint("pages", __name__)


def limits():
    """The app's configured limits (titles, settings sizes) that chat validation reads."""
    return current_app.config


def running_ids(page) -> set[str]:
    """Which chats of a sidebar page are answering (one TurnManager call per page)."""
    return turn_manager().running_among([chat.id for chat in page.pinned + page.items])
