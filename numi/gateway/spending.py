"""Budgets on /v1: a call reserves its estimate before anything leaves, and settles with
its answer's usage, as a turn does (numi/agent/budget_hold.py, numi/chat/budget_ledger.py).

The first route whose budgets have room answers (a route whose endpoint budget is spent
is skipped, the others become its fallbacks); when none has room the call is refused with
the chat path's own codes, `budget_exceeded` (429) or `budget_unpriced` (400), before
any provider is called. The reservation is settled once the answer ends, however it
ends (a client that leaves mid-stream included); a call that answered nothing settles
at zero.
"""

from __future__ import annotations

import logging

from ..agent.routes import Route
from ..chat import budget_ledger
from ..errors import NumiError
from .relay import Answer

log = logging.getLogger(__name__)

# /v1 calls are not chats: the ledger's reservation is keyed to no chat's messages.
NO_CHAT = ""


class CallBudgets:
    """What one /v1 call holds on the user's budgets."""

    def __init__(self, user_id: int, project_id: int | None):
        self.user_id = user_id
        self.project_id = project_id
        self.reservation: budget_ledger.Reservation | None = None

    def reserve(self, routes: list[Route], tokens: tuple[int, int]) -> list[Route]:
        """The routes from the first whose budgets took the estimate (input, output
        tokens); raises the first route's refusal when none has room."""
        first_error: NumiError | None = None
        for index, route in enumerate(routes):
            try:
                self.reservation = budget_ledger.reserve(
                    self.user_id,
                    NO_CHAT,
                    self.project_id,
                    [(route.endpoint_id, route.model)],
                    tokens,
                    rerouted=index + 1 < len(routes),
                )
            except NumiError as exc:
                first_error = first_error or exc
                continue
            return routes[index:]
        assert first_error is not None
        raise first_error

    def settle(self, answer: Answer) -> None:
        """Settle with what the answering route used (once; a failure is logged: the
        reservation then lapses with its period)."""
        held, self.reservation = self.reservation, None
        if held is None:
            return
        usage, route = answer.usage, answer.route
        usages = []
        if usage is not None and route is not None:
            usages.append(
                (
                    route.model,
                    route.endpoint_id,
                    usage.input_tokens or 0,
                    usage.output_tokens or 0,
                )
            )
        try:
            budget_ledger.settle_usage(held, usages)
        except Exception:
            log.exception("a /v1 call's budgets could not be settled")
