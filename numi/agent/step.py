"""What one model call of a turn gave: its text, reasoning, tool calls, usage and timings,
filled in as the stream arrives (agent/runtime.py, and each lane of a compare turn in
agent/lanes.py) and saved with the answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .tool_runner import ToolCall


@dataclass
class StepResult:
    content: str = ""
    reasoning: str = ""
    reasoning_details: Any = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Any = None
    finish_reason: str | None = None
    error: Any = None  # StreamError
    output_started: bool = False
    ttft_ms: float | None = None
    started: float = 0.0
    first_output_at: float | None = None
    ended: float = 0.0
