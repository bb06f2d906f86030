"""A leading `<think>…</think>` in an answer's text, read as reasoning: one reader for
the three wire kinds.

Servers that do not parse a model's reasoning (llama.cpp with `--reasoning-format none`,
models served without a reasoning parser) send the thought as answer text wrapped in
think tags, on every kind: Chat Completions' `delta.content`, Responses'
`response.output_text.delta`, Anthropic's `text_delta`. Each adapter feeds its text
through a `ThinkTagSplitter`, so the thought is shown (and kept) as reasoning, and the
answer saved, and sent back in the next request, carries no tags.
"""

from __future__ import annotations

from collections.abc import Iterator

from .events import ReasoningDelta, TextDelta


class ThinkTagSplitter:
    """Routes a leading `<think>…</think>` in content to reasoning. Only a block at the
    very start counts, so a model writing about the tag mid-answer is left alone.

    Real servers (llama.cpp `--reasoning-format none`) send the tags as chunks of their
    own: `<think>`, `\nThe`, …, `</think>`, `\n\nHello`. The whitespace just inside the
    tags and just after the closing one is dropped wherever the chunks split, so a split
    stream reads exactly like the unsplit form."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self._state = "start"  # start -> thinking -> after (the close) -> text
        self._buffer = ""
        self._thought_started = False  # leading whitespace of the thought is dropped

    @property
    def passed(self) -> bool:
        """Past any think block: content is all answer from here on."""
        return self._state == "text"

    def feed(self, text: str) -> Iterator[tuple[bool, str]]:
        if self._state == "text":
            yield False, text
            return
        if self._state == "after":
            yield from self._after(text)
            return
        self._buffer += text
        if self._state == "start":
            stripped = self._buffer.lstrip()
            if len(stripped) < len(self.OPEN) and self.OPEN.startswith(stripped):
                return  # could still become "<think>"
            if not stripped.startswith(self.OPEN):
                self._state, pending, self._buffer = "text", self._buffer, ""
                yield False, pending
                return
            self._state = "thinking"
            self._buffer = stripped[len(self.OPEN) :]
        end = self._buffer.find(self.CLOSE)
        if end >= 0:
            thought, rest = self._buffer[:end], self._buffer[end + len(self.CLOSE) :]
            self._state, self._buffer = "after", ""
            thought = self._thought(thought.rstrip())
            if thought:
                yield True, thought
            yield from self._after(rest)
            return
        # Hold back a tail that might be the start of "</think>", and trailing whitespace
        # that is dropped if the close follows.
        keep = next(
            (n for n in range(len(self.CLOSE) - 1, 0, -1) if self._buffer.endswith(self.CLOSE[:n])),
            0,
        )
        cut = len(self._buffer) - keep
        ready = self._buffer[:cut]
        cut = len(ready.rstrip())
        ready, self._buffer = self._buffer[:cut], self._buffer[cut:]
        ready = self._thought(ready)
        if ready:
            yield True, ready

    def _thought(self, text: str) -> str:
        if not self._thought_started:
            text = text.lstrip()
            self._thought_started = bool(text)
        return text

    def _after(self, text: str) -> Iterator[tuple[bool, str]]:
        """Text after `</think>`: the blank lines that separate it from the answer go."""
        text = text.lstrip()
        if text:
            self._state = "text"
            yield False, text

    def flush(self) -> Iterator[tuple[bool, str]]:
        """What is still held back when the stream ends."""
        pending, self._buffer = self._buffer, ""
        if self._state == "thinking":
            pending = self._thought(pending.rstrip())
        if pending:
            yield self._state == "thinking", pending


def split_text(think: ThinkTagSplitter, text: str) -> Iterator[TextDelta | ReasoningDelta]:
    """The events of one piece of answer text: past the think block (the common case,
    one per token), the text itself."""
    if think.passed:
        yield TextDelta(text)
        return
    for is_reasoning, piece in think.feed(text):
        yield ReasoningDelta(piece) if is_reasoning else TextDelta(piece)


def flush_text(think: ThinkTagSplitter) -> Iterator[TextDelta | ReasoningDelta]:
    """What the splitter still holds when the stream ends."""
    for is_reasoning, piece in think.flush():
        yield ReasoningDelta(piece) if is_reasoning else TextDelta(piece)
