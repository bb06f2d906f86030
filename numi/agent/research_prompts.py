"""What a research run asks the model (numi/agent/research.py): the plan's prompt, with its
one clarifying question, and the report's, with the sources numbered as the report cites
them; and the plan's sub-questions read from the model's answer."""

from __future__ import annotations

import re
from typing import Any

from .research_documents import cited

MAX_SUB_QUESTIONS = 5
# What the report's request carries of all pages together: the newest pages fit a model's
# window with room for the answer.
REPORT_SOURCE_CHARS = 60_000

PLAN_PROMPT = (
    "You are planning a web research run. Split the request below into 2 to "
    f"{MAX_SUB_QUESTIONS} short sub-questions, each a web search query. Answer with one "
    "sub-question per line, numbered, and nothing else.{clarify}\n\n{conversation}"
    "Request: {question}"
)
# The one clarifying question a run may ask before it starts (ChatGPT's deep research does):
# only on a question's first run, and not right after a run of the chat asked one.
CLARIFY_PROMPT = (
    " If, and only if, the request is too ambiguous to research well, answer instead with "
    "one line: CLARIFY: and the one question whose answer you need."
)
CLARIFY = "CLARIFY:"
CONVERSATION_MESSAGES = 6  # of the chat's history, before the request, in the plan's prompt
CONVERSATION_CHARS = 1000  # of each
REPORT_PROMPT = (
    "Write a research report that answers the request below, from the numbered sources "
    "only. Cite each claim with its source's number in square brackets, like [1]. Say "
    "plainly what the sources do not answer.\n\nRequest: {question}\n\n{plan}Sources:\n\n"
    "{sources}"
)
NO_SOURCES = "(No page could be read. Say so, and answer only what is certain without them.)"


def plan_lines(text: str) -> list[str]:
    """The sub-questions of a plan: its numbered or bulleted lines (or its lines)."""
    questions = []
    for line in text.splitlines():
        question = re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", line).strip()
        if question:
            questions.append(question[:300])
    return questions[:MAX_SUB_QUESTIONS]


def report_sources(read: list[tuple[int, Any]]) -> str:
    """The pages as the report's request carries them, `[n] title (url)` then the text,
    held together under REPORT_SOURCE_CHARS."""
    room = REPORT_SOURCE_CHARS // max(1, len(read))
    return "\n\n".join(
        f"[{number}] {row.title} ({where(row.url)})\n{(row.text or '')[:room]}"
        for number, row in read
    )


def where(url: str) -> str:
    """A source's address as the report's request names it."""
    return "from the user's documents" if cited(url) else url
