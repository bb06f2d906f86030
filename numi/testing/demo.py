"""The answers of `numi dev fake-provider`: plausible markdown, paced like a real model.

- `[tool:NAME]` in the last user message, when the request offers tool NAME: the model
  calls that tool (with no arguments), then, given the result, says what it returned; when
  the request does not offer it (a new chat has no tools on), the answer says how to turn it on.
- `[think]` in the message, or a model name containing "reasoning": reasoning first.
- Numi's title request (numi/chat/titles.py): a short title made from the user's question.
- Otherwise a short markdown answer that quotes the question.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .conversation import conversation_tail
from .scenario import Scenario
from .server import RecordedRequest

_TOOL_MARK = re.compile(r"\[tool:([A-Za-z0-9_.-]+)\]")
# The start of numi.chat.titles.PROMPT (this package does not import the app): the request
# quotes the conversation as "User: <question>\n\nAssistant: <answer>".
_TITLE_REQUEST = "Write a short title"
_TITLE_QUESTION = re.compile(r"\n\nUser: (.*?)\n\nAssistant: ", re.S)
_DEMO_MARKS = re.compile(r"\[(?:think|tool:[A-Za-z0-9_.-]+)\]")

_ANSWER = """## Here is a scripted answer

You asked: *{question}*

This reply comes from Numi's **scripted provider**, so no model was called. It streams
like a real one:

1. text arrives in small chunks,
2. markdown renders as it grows,
3. code blocks are highlighted:

```python
def greet(name: str) -> str:
    return f"Hello, {{name}}!"
```

Ask with `[tool:current_time]` to see a tool call, or `[think]` to see reasoning.
"""


_TOOL_OFF = """The tool `{tool}` is not on in this chat, so I cannot call it.

Open this chat's **Settings** (at the top of the chat), tick the tool under **Tools**
(`current_time` is **Current time**), then ask again with `[tool:{tool}]`.
"""


def demo_scenario(tokens_per_second: float | None = None) -> Callable[[RecordedRequest], Scenario]:
    """A default_scenario hook for ScriptedProvider; `tokens_per_second` paces chunks
    (about four characters each)."""

    def answer(request: RecordedRequest) -> Scenario:
        tail = conversation_tail(request.protocol, request.body)
        scenario = Scenario()
        if tail.user_text.startswith(_TITLE_REQUEST):
            title = demo_title(tail.user_text)
            return scenario.text(title).usage(None, len(title) // 4)
        if tokens_per_second:
            scenario.tokens_per_second(tokens_per_second)
        if tail.tool_output is not None:
            text = f"The tool returned:\n\n```\n{tail.tool_output[:2000]}\n```\n"
            return scenario.text(text, chunks=_chunks(text)).usage(None, len(text) // 4)
        wanted = _TOOL_MARK.search(tail.user_text)
        if wanted and wanted.group(1) in tail.tool_names:
            return scenario.tool_call(wanted.group(1), {}).usage(None, 10)
        if wanted:
            # A new chat has no tools on: say how to turn the one asked for on.
            text = _TOOL_OFF.format(tool=wanted.group(1))
            return scenario.text(text, chunks=_chunks(text)).usage(None, len(text) // 4)
        if "[think]" in tail.user_text or "reasoning" in (request.model or ""):
            thought = (
                "The user wants a demo answer. I will explain what the scripted provider does."
            )
            scenario.reasoning(thought, chunks=_chunks(thought))
        question = " ".join(tail.user_text.split())[:200] or "nothing"
        text = _ANSWER.format(question=question)
        return scenario.text(text, chunks=_chunks(text)).usage(None, len(text) // 4)

    return answer


def demo_title(request_text: str) -> str:
    """The title for Numi's title request: the first six words of the quoted question,
    without the demo's [think]/[tool:…] marks, capitalised, no end punctuation."""
    found = _TITLE_QUESTION.search(request_text)
    words = _DEMO_MARKS.sub(" ", found.group(1) if found else "").split()[:6]
    title = " ".join(words).rstrip(" .,;:!?")
    return (title[:1].upper() + title[1:]) if title else "Demo chat"


def _chunks(text: str) -> int:
    return max(1, len(text) // 4)
