"""Streaming markdown: each completed top-level block is rendered once, and only the last,
still-open one is rendered again as text arrives (`StreamRender`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .blocks import Block, _parse, _render_group, markdown_cap, plain_block
from .markdown import parser

# A line opening display math. Math that is still open can close later and take in the
# lines (even blocks) after it, so a block holding such a line stays open.
_MATH_OPENING = re.compile(r"^ {0,3}(\\\[|\\begin\{|\$\$)", re.MULTILINE)
_MATH_CLOSERS = {"\\[": "\\]", "\\begin{": "\\end{", "$$": "$$"}
_SETTLED_TOKENS = {"math_block", "amsmath", "bracket_math_block", "fence", "code_block"}


def _math_left_open(source: str) -> bool:
    """Whether a line of `source` opens display math that does not close after it."""
    return any(
        source.find(_MATH_CLOSERS[match.group(1)], match.end()) < 0
        for match in _MATH_OPENING.finditer(source)
    )


class StreamRender:
    """The render state of one streaming text (an answer or its reasoning).

    `feed(text)` takes the whole text so far and answers a `Frame`: the blocks completed
    since the last call (rendered once, never again) and the still-open tail rendered as
    blocks. A block is complete when a later top-level block has started on a finished
    line: from then on nothing written later can change it (CommonMark never reopens a
    closed block), except reference-link definitions, which are handled by re-rendering
    the completed blocks once when the definitions change (`Frame.reset`). Work per call
    is proportional to the open tail, not to the whole text. Line breaks must be "\n"
    (the view normalises them), so that lines count as the parser counts them.
    """

    def __init__(self, cap: int | None = None):
        self.offset = 0  # where the open tail starts in the text
        self.references: dict = {}  # link reference definitions in the completed part
        self.rendered_with: dict = {}  # the definitions the completed blocks were rendered with
        self.blocks: list[Block] = []  # completed blocks
        self.open: list[Block] = []
        self.cap = cap  # the markdown cap (markdown_cap() at the first feed when None)
        self.plain = False  # past the cap: the text is shown as it is
        self.parsed_tail = 0  # the open tail's length at the last parse
        self.cached: dict[str, Block] = {}  # closed groups of the tail, by their source
        self.cached_with: dict = {}  # the definitions they were rendered with

    def feed(self, text: str) -> "Frame":
        if self.cap is None:
            self.cap = markdown_cap()
        if self.plain or len(text) > self.cap:
            return self._feed_plain(text)
        tail = text[self.offset :]
        if len(tail) > self.LAZY_TAIL_CHARS and len(tail) < self.parsed_tail * 1.25:
            # A long open block (a big code fence, say) re-parsed on every delta costs
            # quadratic time on the hub: re-parsed once it has grown by a quarter.
            return Frame([], None)
        self.parsed_tail = len(tail)
        env = {"references": dict(self.references)}
        md, tokens, groups = _parse(tail, env)
        lines = tail.split("\n")
        finished_lines = len(lines) - 1  # the last line has no newline yet
        commit = 0  # how many groups are complete
        for index in range(1, len(groups)):
            if groups[index][2] >= finished_lines:
                break
            first, start = tokens[groups[index - 1][0]], groups[index - 1][2]
            if first.type not in _SETTLED_TOKENS and _math_left_open(
                "\n".join(lines[start : groups[index][2]])
            ):
                break  # math opened but not closed yet: a later line may still close it
            commit = index
        definitions = env["references"]
        rendered = self._rendered_groups(md, tokens, groups, lines, env)
        new_blocks, self.open = rendered[:commit], rendered[commit:]
        reset = False
        if commit:
            done_lines = groups[commit][2]
            done = "\n".join(lines[:done_lines]) + "\n"
            # The definitions in the completed part, without the open tail's (still typed).
            if "]:" in done:
                done_env = {"references": dict(self.references)}
                parser().parse(done, done_env)
                self.references = done_env["references"]
            self.offset += len(done)
            self.parsed_tail = len(text) - self.offset
        if definitions != self.rendered_with:
            # A new (or still changing) reference definition may change earlier blocks.
            self.rendered_with = definitions
            reset = bool(self.blocks)
        if reset:
            env = {"references": dict(definitions)}
            md, tokens, groups = _parse(text[: self.offset], env)
            self.blocks = [_render_group(md, tokens[a:b], env) for a, b, _ in groups]
            return Frame(list(self.blocks), self.open, reset=True)
        self.blocks.extend(new_blocks)
        return Frame(new_blocks, self.open, reset=False)

    def _rendered_groups(self, md, tokens, groups, lines, env) -> list[Block]:
        """The tail's groups rendered; a group followed by another (so closed) is rendered
        once for its source lines and the definitions, not again on every delta."""
        if env["references"] != self.cached_with:
            self.cached, self.cached_with = {}, dict(env["references"])
        cache, self.cached = self.cached, {}
        out = []
        for index, (a, b, line) in enumerate(groups):
            after = groups[index + 1][2] if index + 1 < len(groups) else None
            if after is None or after <= line or tokens[a].map is None:
                out.append(_render_group(md, tokens[a:b], env))
                continue
            key = "\n".join(lines[line:after])
            block = cache.get(key)
            if block is None:
                block = _render_group(md, tokens[a:b], env)
            self.cached[key] = block
            out.append(block)
        return out

    # An open tail longer than this is re-parsed only once it has grown by a quarter.
    LAZY_TAIL_CHARS = 8192

    # An open line longer than this is committed anyway: the open part is re-sent each delta.
    PLAIN_OPEN_CHARS = 4096

    def _feed_plain(self, text: str) -> "Frame":
        """Past the cap, as a saved message past it shows: escaped text, no markdown (a
        huge open block re-parsed on every delta costs quadratic time on the hub; issue 28,
        item 5). Finished lines are committed as they come; each frame carries only the
        new lines and the open one."""
        cut = text.rfind("\n", self.offset) + 1
        if len(text) - max(cut, self.offset) > self.PLAIN_OPEN_CHARS:
            cut = len(text)
        reset = not self.plain
        if reset:
            # First time past the cap: the text so far replaces the markdown blocks.
            self.plain, self.offset = True, 0
        done = text[self.offset : cut] if cut > self.offset else ""
        new_blocks = [plain_block(done)] if done else []
        self.offset = max(self.offset, cut)
        self.open = [plain_block(text[self.offset :])] if len(text) > self.offset else []
        if reset:
            self.blocks = new_blocks
            return Frame(list(self.blocks), self.open, reset=True)
        self.blocks.extend(new_blocks)
        return Frame(new_blocks, self.open, reset=False)


@dataclass
class Frame:
    """What changed in one `StreamRender.feed`: `completed` blocks to append (or, with
    `reset`, to replace all completed blocks with) and the `open` blocks to show after them
    (None: unchanged)."""

    completed: list[Block]
    open: list[Block] | None  # None: the open blocks shown are unchanged
    reset: bool = False
