"""A research run's progress view in the HTML stream (`research_plan`, `research_step`,
`research_source`): drawn whole from each event's `progress` (plan, log, pages read and
skipped with why, tokens, elapsed time, the budget), so a reload or a snapshot draws the
same view. While the run goes on, the elapsed time ticks on the page between events
(static/js/research.js, from the view's `started_at` and the server's time when it drew
it; no polling). `HtmlView` takes these handlers from `ResearchFragments`.

The view sits in the turn's container before the live answer, where the report streams.
Page titles, addresses and reasons come from the web: they reach the page only through the
template, escaped; pages' text never does.
"""

from __future__ import annotations

import time
from typing import Any

from flask import render_template


class ResearchFragments:
    """The research handlers of the HTML view; `research_turn` is the turn whose view the
    client holds (a first event inserts it, later ones replace it)."""

    research_turn: str | None = None
    running: bool

    def _on_research_plan(self, turn_id, data):
        return self._research_view(turn_id, data.get("progress"))

    def _on_research_step(self, turn_id, data):
        return self._research_view(turn_id, data.get("progress"))

    def _on_research_source(self, turn_id, data):
        return self._research_view(turn_id, data.get("progress"))

    def _research_snapshot(self, turn_id, data: dict[str, Any], kept: bool) -> list[str]:
        """A snapshot's view: redrawn in a container the client kept, inserted in a new one."""
        if not kept:
            self.research_turn = None
        if data.get("finished") or not data.get("research"):
            return []
        return self._research_view(turn_id, data["research"])

    def _research_view(self, turn_id, progress: dict[str, Any] | None) -> list[str]:
        if not isinstance(progress, dict):
            return []
        replace = self.research_turn == turn_id
        self.research_turn = turn_id
        return [
            render_template(
                "partials/_research_progress.html",
                turn_id=turn_id,
                progress=progress,
                replace=replace,
                running=self.running,
                now=time.time(),  # the page measures its clock's skew from it
            )
        ]
