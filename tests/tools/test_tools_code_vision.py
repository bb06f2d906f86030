"""run_python's images reach a model that can see, downscaled, and no other: through a live
server, a real ipykernel and the scripted provider, on the OpenAI Chat, Anthropic and
Responses protocols (what the recorded request carries after the tool ran)."""

from __future__ import annotations

import base64
import io
import json

import pytest
from fixtures import CODE_EXTRA

from numi.testing import Scenario
from turn_support import Api, Socket, make_chat, of_type, turn_server_env

pytestmark = CODE_EXTRA
Image = pytest.importorskip("PIL.Image", reason="downscaling needs Pillow (numi[images])")


def wide_png() -> bytes:
    """A 2000x1000 PNG: over NUMI_CODE_IMAGE_MAX_SIDE (768), so it must be downscaled."""
    out = io.BytesIO()
    Image.new("RGB", (2000, 1000), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


PLOT = (
    "import base64\n"
    "from IPython.display import Image, display\n"
    f"display(Image(data=base64.b64decode({base64.b64encode(wide_png()).decode()!r})))\n"
    "print('drawn')"
)


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env(NUMI_CODE_MAX_KERNELS="5"))
    yield started
    started.stop()


def ask(server, chat: dict, message: str) -> list[dict]:
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message=message)
        return socket.events_until("turn_end", timeout=60)
    finally:
        socket.close()


def run_plot(server, scripted, *, kind: str, model: str, chat_out: list | None = None) -> dict:
    """One turn whose answer draws the plot; the body of the request that followed it."""
    chat = make_chat(
        Api(server.url),
        scripted,
        kind=kind,
        model=model,
        name=f"scripted-{kind}-{model}",
        settings={"tools": ["run_python"], "tool_policy": {"run_python": "auto"}},
    )
    scripted.enqueue(Scenario().tool_call("run_python", {"code": PLOT}))
    scripted.enqueue(Scenario().text("A red rectangle."))
    events = ask(server, chat, "plot it")
    if chat_out is not None:
        chat_out.append(chat)
    [end] = [e["data"] for e in of_type(events, "tool_end")]
    assert end["ok"], end
    assert [o["type"] for o in end["display"]["outputs"]] == ["image", "stream"]
    return scripted.requests[-1].body


def side(data_url_or_b64: str) -> int:
    data = base64.b64decode(data_url_or_b64.split(",", 1)[-1])
    return max(Image.open(io.BytesIO(data)).size)


def test_a_vision_model_gets_the_plot_downscaled_on_openai_chat(server, scripted):
    made: list[dict] = []
    body = run_plot(server, scripted, kind="openai_chat", model="gpt-4o", chat_out=made)
    *_, call, result, images = body["messages"]
    assert call["role"] == "assistant" and call["tool_calls"]
    # The tool message keeps its text (the API takes no image there); the images follow it.
    assert result["role"] == "tool" and "drawn" in result["content"]
    assert isinstance(result["content"], str)
    assert images["role"] == "user"
    [url] = [p["image_url"]["url"] for p in images["content"] if p["type"] == "image_url"]
    assert url.startswith("data:image/png;base64,") and side(url) == 768
    # The next turn, read back from the database, still shows the model its plot.
    scripted.enqueue(Scenario().text("Still red."))
    ask(server, made[0], "and now?")
    later = scripted.requests[-1].body["messages"]
    roles = [m["role"] for m in later[-5:]]
    assert roles == ["assistant", "tool", "user", "assistant", "user"], roles
    assert later[-3]["content"][1]["image_url"]["url"] == url


def test_a_text_only_model_gets_the_text_alone_on_openai_chat(server, scripted):
    body = run_plot(server, scripted, kind="openai_chat", model="fake-model")
    *_, result = body["messages"]
    assert result["role"] == "tool" and "[image image/png" in result["content"]
    assert "data:image" not in json.dumps(body)


def test_a_vision_model_gets_the_plot_downscaled_on_anthropic(server, scripted):
    body = run_plot(server, scripted, kind="anthropic", model="claude-test-4")
    [block] = [
        b
        for m in body["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    text, image = block["content"]
    assert text["type"] == "text" and "drawn" in text["text"]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert side(image["source"]["data"]) == 768


def test_a_text_only_model_gets_the_text_alone_on_anthropic(server, scripted):
    body = run_plot(server, scripted, kind="anthropic", model="fake-model")
    [block] = [
        b
        for m in body["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert isinstance(block["content"], str) and "[image image/png" in block["content"]
    assert '"type": "image"' not in json.dumps(body)


def test_a_vision_model_gets_the_plot_downscaled_on_responses(server, scripted):
    body = run_plot(server, scripted, kind="openai_responses", model="gpt-4o")
    [output] = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    text, image = output
    assert text["type"] == "input_text" and "drawn" in text["text"]
    assert image["type"] == "input_image" and side(image["image_url"]) == 768
