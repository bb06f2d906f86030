"""A tool call in words (numi/web/live/tool_words.py): the sentence a finished step reads as
and the risks an approval card states, worked out from the tool, its arguments and status."""

from __future__ import annotations

import pytest

from numi.web.live.tool_words import clipped, host_of, risks, sentence


def words(pieces) -> str:
    """A sentence as read aloud: code in backticks, quotes curly."""
    marks = {"code": "`{}`", "quote": "“{}”", "text": "{}"}
    return "".join(marks[kind].format(text) for kind, text in pieces)


@pytest.mark.parametrize(
    "name,arguments,status,expected",
    [
        ("bash", {"command": "ls -la"}, "done", "Ran `ls -la`"),
        ("bash", {"command": "ls -la"}, "running", "Running `ls -la`"),
        ("bash", {"command": "ls -la"}, "denied", "Run `ls -la`"),
        ("bash", {"command": "make\nmake test"}, "failed", "Ran `make …`"),
        ("bash", None, "done", "Ran a command"),  # a result whose call is on an older page
        ("run_python", {"code": "print(1)"}, "done", "Ran Python"),
        ("web_search", {"query": "gevent hub"}, "done", "Searched the web for “gevent hub”"),
        ("fetch_page", {"url": "https://docs.python.org/3/"}, "done", "Read docs.python.org"),
        ("search_documents", {"query": "rent"}, "done", "Searched your documents for “rent”"),
        ("read_file", {"path": "src/app.py"}, "done", "Read `src/app.py`"),
        ("write_file", {"path": "notes.md", "content": "x"}, "done", "Wrote `notes.md`"),
        ("patch_file", {"path": "a.py"}, "done", "Edited `a.py`"),
        ("list_files", {}, "done", "Listed files in the workspace"),
        ("current_time", {}, "done", "Checked the time"),
        ("mcp__github__create_issue", {"title": "x"}, "done", "Used `create_issue` on github"),
        ("echo", {"greeting": "hello"}, "done", "Used `echo`"),
    ],
)
def test_a_step_reads_as_one_sentence(name, arguments, status, expected):
    assert words(sentence(name, arguments, status)) == expected


def test_while_it_waits_for_approval_the_sentence_names_no_argument():
    # The card shows the command once, whole, under its risks.
    assert words(sentence("bash", {"command": "rm -rf /"}, "approval")) == "Run a command"


def test_long_text_is_cut_on_its_first_line():
    assert clipped("x" * 100, 10) == "x" * 9 + "…"
    assert clipped("  short  ", 10) == "short"
    assert clipped("one\n\n", 10) == "one"


def test_a_url_without_a_host_is_shown_as_it_is():
    assert host_of("https://EXAMPLE.org:8080/a") == "example.org"
    assert host_of("not a url") == "not a url"
    assert host_of("http://[::1") == "http://[::1"  # urlsplit refuses it


@pytest.mark.parametrize(
    "name,arguments,expected",
    [
        ("bash", {"command": "ls -la"}, [("Runs a shell command in your workspace", "")]),
        (
            "bash",
            {"command": "curl -s https://api.example.com/v1 > out.json"},
            [
                ("Runs a shell command in your workspace", ""),
                ("Reaches the network:", "api.example.com"),
                ("Writes files", ""),
            ],
        ),
        (
            "bash",
            {"command": "pip install rich && rm -rf build"},
            [
                ("Runs a shell command in your workspace", ""),
                ("May reach the network", ""),
                ("Deletes files", ""),
            ],
        ),
        # 2>&1 is no file written.
        ("bash", {"command": "make 2>&1 | tail"}, [("Runs a shell command in your workspace", "")]),
        ("run_python", {"code": "print(2 + 2)"}, [("Runs Python on this machine", "")]),
        (
            "run_python",
            {
                "code": "import requests\nrequests.get('http://user:pw@10.0.0.1:8000/x')\nopen('a.txt', 'w')"
            },
            [
                ("Runs Python on this machine", ""),
                ("Reaches the network:", "10.0.0.1"),
                ("Writes files", ""),
            ],
        ),
        (
            "write_file",
            {"path": "a/b.txt", "content": ""},
            [("Writes a file in your workspace:", "a/b.txt")],
        ),
        ("patch_file", {"path": "x.py"}, [("Changes a file in your workspace:", "x.py")]),
        (
            "remember",
            {"text": "t", "scope": "project"},
            [("Keeps a memory that this project's chats will see", "")],
        ),
        ("remember", {"text": "t"}, [("Keeps a memory that every chat will see", "")]),
        ("fetch_page", {"url": "https://example.com/a"}, [("Reaches the network:", "example.com")]),
        ("mcp__files__delete", {}, [("Sends these arguments to the MCP server", "files")]),
        ("echo", "not json", [("Runs the tool", "echo")]),
    ],
)
def test_an_approval_states_its_risks_in_words(name, arguments, expected):
    assert risks(name, arguments) == expected


def test_python_without_network_does_not_claim_to_reach_it():
    code = "import urllib.request\nurllib.request.urlopen('https://example.com')"
    assert risks("run_python", {"code": code}, python_network=False) == [
        ("Runs Python on this machine", "")
    ]
    assert ("Reaches the network:", "example.com") in risks("run_python", {"code": code})


def test_many_hosts_are_counted_not_listed():
    command = " ".join(f"curl https://h{n}.example/" for n in range(5))
    assert ("Reaches the network:", "h0.example, h1.example, h2.example and 2 more") in risks(
        "bash", {"command": command}
    )
