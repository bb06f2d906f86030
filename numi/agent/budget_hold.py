"""A turn's hold on its budgets: reserved before anything leaves, settled when it ends.

The `Agent` reserves on the first route whose budgets have room (a route whose endpoint
budget is spent is skipped, and the turn says so as a `model_route` notice); when none has
room the turn ends with `budget_exceeded` before the question is saved. At the turn's end,
however it ends, the reservation is settled with the answers' real usage
(numi/chat/budget_ledger.py). A compare turn reserves every lane's estimate together
(each lane's endpoint budget only its own), and none runs when one has no room.
"""

from __future__ import annotations

import logging

from ..chat import budget_ledger
from ..errors import NumiError
from ..turns.turn import Turn
from .routes import Route

log = logging.getLogger(__name__)


class BudgetHold:
    """What one turn holds on its budgets."""

    def __init__(self, turn: Turn, output_tokens: int):
        self.turn = turn
        self.output_tokens = output_tokens
        self.reservation: budget_ledger.Reservation | None = None
        # A compare turn's lanes (set by CompareAgent): all reserve together, none skipped.
        self.lanes: list[list[Route]] | None = None

    def reserve(self, routes: list[Route], project_id: int | None) -> list[Route]:
        """The routes from the first whose budgets took this turn's estimate. Raises the
        first route's refusal when no route has room. `project_id` is the chat's (its
        meta, read at the turn's start)."""
        req = self.turn.request
        estimated: list[tuple[int, int]] = []

        def tokens() -> tuple[int, int]:
            # A query, made only when a budget applies, and once for all the routes.
            if not estimated:
                estimated.append(
                    budget_ledger.estimate_tokens(req.chat_id, req.message, self.output_tokens)
                )
            return estimated[0]

        if self.lanes is not None:
            firsts = [(lane[0].endpoint_id, lane[0].model) for lane in self.lanes]
            self.reservation = budget_ledger.reserve(
                req.user_id, req.chat_id, project_id, firsts, tokens
            )
            return routes
        first_error: NumiError | None = None
        for index, route in enumerate(routes):
            try:
                self.reservation = budget_ledger.reserve(
                    req.user_id,
                    req.chat_id,
                    project_id,
                    [(route.endpoint_id, route.model)],
                    tokens,
                    rerouted=index + 1 < len(routes),
                    # The question's save, or the release before the model call, ends it.
                    end_read=False,
                )
            except NumiError as exc:
                first_error = first_error or exc
                if index + 1 < len(routes):
                    following = routes[index + 1]
                    self.turn.emit(
                        "model_route",
                        {
                            "endpoint_id": following.endpoint_id,
                            "model": following.model,
                            "reason": exc.code,
                            "notice": f"{route.model} skipped ({exc.message}) "
                            f"Trying {following.model}.",
                        },
                    )
                continue
            return routes[index:]
        assert first_error is not None
        raise first_error

    def settle(self) -> None:
        """Settle the reservation with the real usage (once; a failure is logged: the
        reservation then lapses with its period)."""
        held, self.reservation = self.reservation, None
        if held is None:
            return
        try:
            budget_ledger.settle(held)
        except Exception:
            log.exception("turn %s: its budgets could not be settled", self.turn.id)
