"""The scripted provider itself: queues, defaults, demo mode, concurrency."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import urllib.request

from provider_test_support import joined, of_type, request, tool_result, user

from numi.providers import TextDelta, ToolCallComplete, ToolSpec
from numi.testing import Scenario, ScriptedProvider
from numi.testing.demo import demo_scenario
from server_wait import WAIT_SECONDS


def test_scenarios_keyed_by_model_do_not_mix(scripted, make_adapter):
    scripted.enqueue(Scenario().text("for B"), model="model-b")
    scripted.enqueue(Scenario().text("for anyone"))
    adapter = make_adapter("openai_chat")

    a = joined(list(adapter.stream(request(model="model-a"))), TextDelta)
    b = joined(list(adapter.stream(request(model="model-b"))), TextDelta)

    assert (a, b) == ("for anyone", "for B")


def test_empty_queue_answers_with_an_echo(scripted, adapter):
    events = list(adapter.stream(request(user("ping me"))))
    assert joined(events, TextDelta) == "Scripted reply: ping me"


def test_wait_for_the_nth_request(scripted, adapter):
    caller = threading.Thread(target=lambda: [list(adapter.stream(request())) for _ in range(2)])
    caller.start()
    second = scripted.wait_for_requests(2, timeout=WAIT_SECONDS)
    assert second.body["model"] == "scripted-model"
    # Its second answer may still be streaming: the call ends here, not in the next test.
    caller.join(WAIT_SECONDS)


def test_demo_mode_calls_a_requested_tool_then_reports_its_result(make_adapter, kind):
    with ScriptedProvider(default_scenario=demo_scenario()) as server:
        url = server.anthropic_base_url if kind == "anthropic" else server.openai_base_url
        adapter = make_adapter(kind, base_url=url)
        tools = [ToolSpec("current_time")]
        history = [user("What time is it? [tool:current_time]")]

        (call,) = of_type(list(adapter.stream(request(*history, tools=tools))), ToolCallComplete)
        history += [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": "{}"},
                    }
                ],
            },
            tool_result(call.id, "2026-01-01T12:00:00Z"),
        ]
        answer = joined(list(adapter.stream(request(*history, tools=tools))), TextDelta)

    assert call.name == "current_time"
    assert "2026-01-01T12:00:00Z" in answer


def test_demo_mode_plain_answer_is_markdown(make_adapter):
    with ScriptedProvider(default_scenario=demo_scenario()) as server:
        adapter = make_adapter("openai_chat", base_url=server.openai_base_url)
        events = list(adapter.stream(request(user("Hello there"))))
    text = joined(events, TextDelta)
    assert text.startswith("## ") and "Hello there" in text and "```python" in text
    assert len(of_type(events, TextDelta)) > 50  # streamed in token-sized chunks


def test_many_concurrent_paced_streams(scripted, make_adapter):
    adapter = make_adapter("openai_chat")
    streams = 40
    for _ in range(streams):
        scripted.enqueue(Scenario().text("x" * 10, chunks=10).tokens_per_second(100))
    results: list[str] = []

    def consume() -> None:
        results.append(joined(list(adapter.stream(request())), TextDelta))

    threads = [threading.Thread(target=consume) for _ in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    # Every paced stream completes intact; how long they take side by side is bench/'s job.
    assert results == ["x" * 10] * streams


def test_command_line_server_answers(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "numi.testing", "--port", str(port), "--tokens-per-second", "1000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "/v1" in process.stdout.readline() + process.stdout.readline()
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
        with opener.open(f"http://127.0.0.1:{port}/v1/models", timeout=5) as response:
            assert json.load(response)["object"] == "list"
    finally:
        process.terminate()
        process.wait(5)
