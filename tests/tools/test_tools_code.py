"""run_python through a live server and a real ipykernel: approval bound to the digest, state
across calls and turns, output streamed to the card, images kept as attachments, a DataFrame's
HTML sanitised, files listed for download, the limits (wall time, memory, output, code size),
no secrets in the kernel's environment, Stop mid-run, two chats with their own kernels, a
kernel that dies and one restarted from the header.

One server for the module; each chat's kernel is started once and shared by the tests that
use that chat (a start costs 1-2 s). The test of two chats' kernels and their limit has a
server of its own: it needs to know how many kernels are running, whatever ran before it."""

from __future__ import annotations

import base64
import json
import urllib.request
from html.parser import HTMLParser

import pytest
from fixtures import CODE_EXTRA

from numi.testing import Scenario
from turn_support import (
    ACCESS_TOKEN,
    Api,
    Socket,
    make_chat,
    of_type,
    turn_server_env,
    upload_attachment,
)
from server_wait import WAIT_SECONDS

pytestmark = CODE_EXTRA

SECRETS = {
    "MY_SERVICE_API_KEY": "sk-live-0123456789abcdef",
    "NUMI_SECRET_KEY": "numi-session-secret-4242424242",
    "OPENAI_API_KEY": "sk-proj-openai-key-1357913579",
}
# A 1x1 red PNG, made by hand so the test needs no plotting library.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(
        # A process of its own: the test reads /proc/<server>/environ, which a forked
        # server's would hold the zygote's environment in, not this start's secrets.
        own_process=True,
        **turn_server_env(
            # Room for a busy loop to use its 1 s of CPU on a loaded machine before the wall
            # time ends it; importing pandas takes about 0.5 s of CPU.
            NUMI_CODE_TIMEOUT_SECONDS="8",
            NUMI_CODE_MEMORY_MB="1024",
            NUMI_CODE_MAX_OUTPUT_CHARS="3000",
            NUMI_CODE_MAX_CHARS="5000",
            # The approval, main and limits chats' kernels (the limit's own test has a server
            # of its own).
            NUMI_CODE_MAX_KERNELS="3",
            NUMI_CODE_CPU_SECONDS="1",
            NUMI_APPROVAL_TIMEOUT_SECONDS="20",
            **SECRETS,
        ),
    )
    yield started
    started.stop()


@pytest.fixture(scope="module")
def chats(server):
    """Chats made once per module, by name, so that tests share their kernels."""
    return {}


def code_chat(server, scripted, chats, name: str, policy: str = "auto") -> dict:
    if name not in chats:
        chats[name] = make_chat(
            Api(server.url),
            scripted,
            settings={"tools": ["run_python"], "tool_policy": {"run_python": policy}},
        )
    return chats[name]


def run(server, scripted, chat, *codes: str, until="turn_end", attachments=()) -> list[dict]:
    """One turn whose answer calls run_python once per code (in one step), then ends."""
    step = Scenario()
    for code in codes:
        step.tool_call("run_python", {"code": code})
    scripted.enqueue(step)
    scripted.enqueue(Scenario().text("Finished."))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="run it", attachments=list(attachments))
        return socket.events_until(until, timeout=60)
    finally:
        socket.close()


def fetch(server, path: str) -> tuple[str, bytes]:
    """GET `path` as the signed-in user: (content type, body)."""
    request = urllib.request.Request(
        server.url + path, headers={"Authorization": f"Bearer {ACCESS_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers["Content-Type"], response.read()


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def unsafe(html: str) -> list:
    """The elements and attributes in `html` that could run script (escaped text is not)."""
    parser = Tags()
    parser.feed(html)
    found = []
    for tag, attrs in parser.tags:
        if tag in ("script", "iframe", "svg", "object", "embed", "style"):
            found.append(tag)
        for name, value in attrs:
            if name.startswith("on") or "javascript:" in (value or "").lower():
                found.append((tag, name, value))
        if tag == "img" and not dict(attrs).get("src", "").startswith("/api/attachments/"):
            found.append((tag, attrs))
    return found


def ends(events) -> list[dict]:
    return [e["data"] for e in of_type(events, "tool_end")]


def test_approval_with_the_digest_then_state_across_calls_and_turns(server, scripted, chats):
    # A chat of its own, whatever ran before: asking, with no kernel started before (after a
    # server restart its first call would say the kernel was restarted).
    chat = code_chat(server, scripted, chats, "approval", policy="ask")
    code = "x = 41\nprint('step one')"
    scripted.enqueue(Scenario().tool_call("run_python", {"code": code}))
    scripted.enqueue(Scenario().text("Finished."))
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="go")
        [card] = [e["data"] for e in of_type(socket.events_until("tool_approval"), "tool_approval")]
        assert card["arguments"] == {"code": code}
        socket.send(type="approve", call_id=card["call_id"], decision="approve", digest="0" * 64)
        [error] = of_type(socket.events_until("error"), "error")
        assert error["data"]["code"] == "approval_mismatch"
        socket.send(
            type="approve", call_id=card["call_id"], decision="approve", digest=card["digest"]
        )
        events = socket.events_until("turn_end", timeout=60)
    finally:
        socket.close()
    [end] = ends(events)
    assert end["ok"] and end["result"] == "step one"
    # What it printed streamed to the card before the call ended.
    output = of_type(events, "tool_output")
    assert output and output[0]["data"]["text"] == "step one\n"
    assert events.index(output[0]) < events.index(of_type(events, "tool_end")[0])
    # The next turn (no approval asked now) finds the variable: one kernel per chat.
    Api(server.url).call(
        "PATCH", f"/api/session/{chat['id']}", {"settings": {"tool_policy": {"run_python": "auto"}}}
    )
    [end] = ends(run(server, scripted, chat, "x + 1"))
    assert end["ok"] and end["result"] == "Out: 42", end


def test_images_tables_and_files_are_kept_and_sanitised(server, scripted, chats):
    chat = code_chat(server, scripted, chats, "main")
    xss = [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(2)>",
        '<a href="javascript:alert(3)">x</a>',
        "<svg onload=alert(4)>",
        '"><iframe src=javascript:alert(5)>',
    ]
    code = (
        "import base64, pandas as pd\n"
        "from IPython.display import HTML, Image, display\n"
        f"display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))\n"
        f"df = pd.DataFrame({{'payload': {xss!r}}})\n"
        "open('table.csv', 'w').write(df.to_csv())\n"
        "display(df)\n"
        # What a hostile model would write: the cells unescaped, the table's tag too.
        "display(HTML(df.to_html(escape=False).replace('<table', '<table onmouseover=alert(6)')))"
    )
    [end] = ends(run(server, scripted, chat, code))
    assert end["ok"], end
    display = end["display"]
    [image] = [o for o in display["outputs"] if o["type"] == "image"]
    tables = [o for o in display["outputs"] if o["type"] == "html"]
    assert len(tables) == 2
    [csv] = display["files"]
    assert csv["name"] == "table.csv" and csv["new"] and csv["attachment_id"]
    assert "[image image/png" in end["result"] and "base64" not in end["result"]
    # The image is the user's attachment, served as the PNG it is.
    assert fetch(server, f"/api/attachments/{image['attachment_id']}") == ("image/png", PNG)
    # The reloaded page draws the saved card: the picture, the tables, the file; no script.
    page = fetch(server, f"/c/{chat['id']}")[1].decode()
    assert f'src="/api/attachments/{image["attachment_id"]}"' in page
    assert f'href="/api/attachments/{csv["attachment_id"]}?download"' in page
    outputs = page[page.rindex('class="code-outputs"') :]
    outputs = outputs[: outputs.index("</details>")]
    assert outputs.count("<table") == 2 and "&lt;script&gt;alert(1)" in outputs
    assert unsafe(outputs) == []
    for table in tables:
        assert "<table" in table["html"] and "<script" not in table["html"]
    assert [table["script_removed"] for table in tables] == [False, True]
    # The hostile one is offered whole to the artifact sandbox, as escaped text on the page.
    assert "source" not in tables[0] and "onmouseover=alert(6)" in tables[1]["source"]
    assert "runs script: shown here without it" in outputs
    assert "onmouseover=alert(6)" in outputs and "Run output" in outputs
    # The exports keep it: the JSON export the card's display, the Markdown its description.
    exported = json.loads(fetch(server, f"/api/session/{chat['id']}/export?fmt=json")[1])
    assert f'"attachment_id": {image["attachment_id"]}' in json.dumps(exported)
    markdown = fetch(server, f"/api/session/{chat['id']}/export?fmt=md")[1].decode()
    assert "[image image/png" in markdown and "table.csv" in markdown


def test_limits_wall_time_cpu_time_memory_output_and_code_size(server, scripted, chats):
    chat = code_chat(server, scripted, chats, "limits")
    loop, busy, bomb, flood = (
        "import time\ny = 7\nwhile True:\n    time.sleep(0.2)",
        "while True:\n    pass",
        "b = bytearray(8 * 1024**3)",
        "while True:\n    print('flood ' * 50)",
    )
    by_code = {}
    for code in (loop, busy, bomb, flood, "z = 1\n" * 2000):
        [end] = ends(run(server, scripted, chat, code))
        by_code[code] = end
    assert (
        by_code[loop]["error_code"] == "timeout" and "time limit of 8 s" in by_code[loop]["result"]
    )
    assert (
        by_code[busy]["error_code"] == "cpu_limit" and "1 s of CPU time" in by_code[busy]["result"]
    )
    assert (
        by_code[bomb]["error_code"] == "python_error" and "MemoryError" in by_code[bomb]["result"]
    )
    assert by_code[flood]["error_code"] == "output_limit"
    assert "more characters of output were cut" in by_code[flood]["result"]
    # The output cap (3000), the end of the KeyboardInterrupt's traceback, the reason.
    assert len(by_code[flood]["result"]) < 5000
    assert by_code["z = 1\n" * 2000]["error_code"] == "code_too_large"
    # Each was interrupted, not killed: the kernel and its variables are still there.
    [end] = ends(run(server, scripted, chat, "y"))
    assert end["ok"] and end["result"] == "Out: 7"


def test_no_secrets_and_no_network_in_the_kernel(server, scripted, chats):
    chat = code_chat(server, scripted, chats, "limits")
    code = (
        "import os\n"
        "print(sorted(os.environ))\n"
        "print(open('/proc/self/environ', 'rb').read())\n"
        f"try:\n    print(open('/proc/{server.proc.pid}/environ', 'rb').read())\n"
        "except OSError as exc:\n    print('refused', type(exc).__name__)\n"
        "import socket\n"
        "try:\n    socket.create_connection(('127.0.0.1', %d), timeout=3)\n    print('connected')\n"
        "except OSError as exc:\n    print('no network', exc.errno)\n" % server.port
    )
    [end] = ends(run(server, scripted, chat, code))
    assert end["ok"], end
    text = end["result"]
    for name, value in SECRETS.items():
        assert name not in text and value not in text
    assert "refused PermissionError" in text
    assert "NUMI_" not in text and "no network" in text and "connected" not in text


def test_stop_mid_run_keeps_the_output_and_the_kernel(server, scripted, chats):
    chat = code_chat(server, scripted, chats, "limits")
    scripted.enqueue(
        Scenario().tool_call(
            "run_python",
            {"code": "w = 5\nimport time\nprint('started', flush=True)\ntime.sleep(120)"},
        )
    )
    socket = Socket(server, chat["id"])
    try:
        socket.send(type="send", message="go")
        socket.events_until("tool_output", timeout=60)
        socket.send(type="stop")
        events = socket.events_until("turn_end", timeout=WAIT_SECONDS)
    finally:
        socket.close()
    [end] = ends(events)
    assert end["error_code"] == "interrupted" and "started" in end["result"]
    assert "KeyboardInterrupt" in end["result"]
    [end] = ends(run(server, scripted, chat, "w * 2"))
    assert end["ok"] and end["result"] == "Out: 10"


def test_two_chats_have_their_own_kernels_and_a_dead_or_restarted_one_is_replaced(
    live_server_factory, scripted
):
    # A server of its own: the limit is per user and the module's other tests leave kernels
    # running (how many depends on which ran before), so only here are no kernels running
    # at the start, whatever the order the tests run in.
    server = live_server_factory(**turn_server_env(NUMI_CODE_MAX_KERNELS="2"))
    mine: dict[str, dict] = {}
    first, second, third = (code_chat(server, scripted, mine, n) for n in ("1", "2", "3"))
    # Two chats hold a kernel each, with a variable each: a third is one more than allowed.
    [end] = ends(run(server, scripted, first, "x = 41"))
    assert end["ok"], end
    [end] = ends(run(server, scripted, second, "w = 5"))
    assert end["ok"], end
    [end] = ends(run(server, scripted, third, "print(1)"))
    assert end["error_code"] == "kernel_limit" and "most allowed" in end["result"]
    # Restart kernel (the chat header) ends the first chat's kernel and frees its place.
    status, body = Api(server.url).call(
        "POST", f"/c/{first['id']}/kernel/restart", headers={"Accept": "application/json"}
    )
    assert status == 200 and body["restarted"] is True
    # Another chat's variables are not this chat's: `w` is the second chat's, still running.
    [end] = ends(run(server, scripted, third, "w"))
    assert end["error_code"] == "python_error" and "NameError" in end["result"]
    [end] = ends(run(server, scripted, second, "w"))
    assert end["ok"] and end["result"] == "Out: 5"
    # A kernel that dies: the card says so, the next call starts a new one and says that.
    [end] = ends(
        run(server, scripted, third, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    )
    assert end["error_code"] == "kernel_died" and "variables are gone" in end["result"]
    [end] = ends(run(server, scripted, third, "print('again')"))
    assert (
        end["ok"]
        and end["result"]
        == "The previous kernel died; this is a new one: variables are gone.\nagain"
    )
    # The restarted chat's next call says its variables are gone.
    Api(server.url).call(
        "POST", f"/c/{third['id']}/kernel/restart", headers={"Accept": "application/json"}
    )
    [end] = ends(run(server, scripted, first, "print('x' in dir())"))
    assert end["result"] == "The kernel was restarted; variables are gone.\nFalse"
    # Nobody else's chat: 404.
    status, _ = Api(server.url).call(
        "POST", "/c/not-a-chat/kernel/restart", headers={"Accept": "application/json"}
    )
    assert status == 404
    server.stop()


def test_after_a_server_restart_the_next_call_says_the_variables_are_gone(server, scripted, chats):
    # Its own `y`, not the limits test's, as it may run alone or first; in the limits chat,
    # whose kernel may be running already, so as not to need a fourth of the 3 allowed.
    chat = code_chat(server, scripted, chats, "limits")
    [end] = ends(run(server, scripted, chat, "y = 7"))
    assert end["ok"], end
    server.restart()
    rain = upload_attachment(server.url, "rain.csv", b"city,mm\nLyon,831\n", "text/csv")
    code = "print('y' in dir())\nprint(open('attachments/rain.csv').read())"
    [end] = ends(run(server, scripted, chat, code, attachments=[rain]))
    # The new kernel says so, and reads the chat's attached file in its folder.
    assert (
        end["result"] == "The kernel was restarted; variables are gone.\nFalse\ncity,mm\nLyon,831"
    )
