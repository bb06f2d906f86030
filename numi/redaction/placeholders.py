"""A chat's placeholders (`[EMAIL_1]` ⇄ the value) and one text through the rules.

A value gets its placeholder the first time a request of the chat carries it and keeps it
for the chat's life, on every endpoint and in every later request, so a model sees the
same `[NAME_1]` for the same person throughout and the history's prefix stays byte-stable
(prompt caches keep working). The user's words are matched whatever their case and share
one placeholder per word.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from .detectors import Detector
from .rules import RedactionRules

# What a placeholder looks like; `restore` holds back a chunk's tail that could begin one.
PLACEHOLDER = re.compile(r"\[([A-Z][A-Z0-9]{0,19})_([1-9][0-9]{0,5})\]")
MAX_PLACEHOLDER_CHARS = 1 + 20 + 1 + 6 + 1


class Placeholders:
    """The mapping of one chat. `added` lists the pairs made since it was loaded (the chat
    stores them before the request leaves)."""

    def __init__(self, entries: Iterable[tuple[str, str]] = ()):
        self.values: dict[str, str] = {}  # placeholder -> the value it stands for
        self._keys: dict[str, str] = {}  # the value's key -> placeholder
        self._numbers: Counter[str] = Counter()  # label -> highest number given
        self.added: list[tuple[str, str]] = []
        for placeholder, value in entries:
            self._remember(placeholder, value)

    def _remember(self, placeholder: str, value: str) -> None:
        match = PLACEHOLDER.fullmatch(placeholder)
        if match is None:
            return
        self.values[placeholder] = value
        self._keys.setdefault(_key(value), placeholder)
        label, number = match.group(1), int(match.group(2))
        self._numbers[label] = max(self._numbers[label], number)

    def placeholder(self, label: str, value: str) -> str:
        """The value's placeholder in this chat, made (as `[LABEL_n]`) on first sight."""
        key = _key(value)
        found = self._keys.get(key)
        if found is not None:
            return found
        self._numbers[label] += 1
        placeholder = f"[{label}_{self._numbers[label]}]"
        self.values[placeholder] = value
        self._keys[key] = placeholder
        self.added.append((placeholder, value))
        return placeholder


def _key(value: str) -> str:
    # Case does not make another person or address: "Jane Roe" and "jane roe" are one.
    return value.casefold()


def exempt_keys(values: Iterable[str]) -> frozenset[str]:
    """Values the user let through as they are for one request, as `redact_text` compares
    them (whatever their case, as placeholders do)."""
    return frozenset(_key(value) for value in values)


def redact_text(
    text: str,
    rules: RedactionRules,
    placeholders: Placeholders,
    counts: Counter[str],
    exempt: frozenset[str] = frozenset(),
) -> str:
    """`text` with every match of `rules` replaced by its placeholder; `counts` gains one
    per replaced item, by label. A match whose value is in `exempt` (`exempt_keys`) stays
    as it is, and gets no placeholder."""
    if not text:
        return text
    # The numeric regions (phones, cards, IPv4) are found once per version of the text.
    regions: dict[Any, list[tuple[int, int]]] = {}
    for detector in rules.detectors:
        parts: list[str] = []
        last = 0
        within = detector.within
        if within is not None and within not in regions:
            regions[within] = detector.regions(text)
        for start, end in detector.spans(text, regions.get(within)):
            value = text[start:end]
            if "[" in value and PLACEHOLDER.search(value):
                continue  # a placeholder an earlier rule made
            if exempt and _key(value) in exempt:
                continue  # the user let it through, for this request only
            label = _label(detector, value)
            counts[label] += 1
            parts.append(text[last:start])
            parts.append(placeholders.placeholder(label, value))
            last = end
        if parts:
            parts.append(text[last:])
            text = "".join(parts)
            regions.clear()
    return text


def _label(detector: Detector, value: str) -> str:
    labels = detector.labels
    return labels.get(value.lower(), detector.label) if labels else detector.label


def matches(text: str, rules: RedactionRules) -> list[tuple[int, int, str]]:
    """Where `rules` would replace in `text`: (start, end, label), in order, without
    overlaps (the earlier rule wins), for the context panel's highlights."""
    found: list[tuple[int, int, str]] = []
    regions: dict[Any, list[tuple[int, int]]] = {}
    for detector in rules.detectors:
        within = detector.within
        if within is not None and within not in regions:
            regions[within] = detector.regions(text)
        for start, end in detector.spans(text, regions.get(within)):
            if any(s < end and start < e for s, e, _ in found):
                continue
            found.append((start, end, _label(detector, text[start:end])))
    return sorted(found)
