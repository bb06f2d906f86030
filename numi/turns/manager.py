"""TurnManager: the registry of running turns (filled in by the turn runtime)."""

from __future__ import annotations

from flask import Flask


class TurnManager:
    def __init__(self, app: Flask):
        self.app = app

    def is_running(self, chat_id: str) -> bool:
        return False
