"""The scripted provider server used by tests, demos and benchmarks (see server.py)."""

from .scenario import LLAMA_CPP_CONTEXT_ERROR, VLLM_CONTEXT_ERROR, Scenario
from .server import RecordedRequest, ScriptedProvider, echo_scenario

__all__ = [
    "LLAMA_CPP_CONTEXT_ERROR",
    "VLLM_CONTEXT_ERROR",
    "RecordedRequest",
    "Scenario",
    "ScriptedProvider",
    "echo_scenario",
]
