"""`bash`: run a shell command in the chat's workspace, after the user approves it.

The command runs through gevent.subprocess (the hub keeps serving while it runs), in its
own process group so a timeout kills everything it started. Output (stdout and stderr
together) is read as it comes and capped: the head and the tail are kept, the middle is
counted. The server itself is undumpable and the child cannot regain CAP_SYS_PTRACE
(numi/process_guard.py), so /proc/<server>/environ is closed to it. The child's
environment is built from a short allow-list, so none of Numi's
settings, keys or tokens reach it, and any such value that still shows up in the output
(read from a file, say) is masked: as it is, and base64-, hex- or URL-encoded, since a
command can print a secret in any of those just as easily.
"""

from __future__ import annotations

import base64
import os
import re
import signal
from collections import deque
from urllib.parse import quote

import gevent
from flask import current_app
from gevent import subprocess

from ...process_guard import drop_ptrace_capability
from . import Tool, ToolContext, ToolFailure
from .workspace import WorkspaceError, workspace_root

# Only these variables pass to the command; everything else (NUMI_*, *_API_KEY, *_TOKEN,
# *SECRET*, database URLs, ...) stays behind.
ENV_ALLOW = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR", "TERM")
SECRET_NAME = re.compile(
    r"(^NUMI_|_API_KEY$|_KEY$|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|DATABASE_URL|^PG)", re.I
)


def child_environment(workspace: str) -> dict[str, str]:
    """The environment a command sees: allow-listed variables only, never a secret."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in ENV_ALLOW or k.startswith("LC_")) and not SECRET_NAME.search(k)
    }
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["PWD"] = workspace
    env["TERM"] = "dumb"
    return env


def secret_values() -> list[str]:
    """Values of this process's secret-looking variables and app keys, to mask in output."""
    values = {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= 8}
    for name in ("SECRET_KEY", "NUMI_ACCESS_TOKEN"):  # also when generated into the data directory
        value = current_app.config.get(name)
        if isinstance(value, str) and len(value) >= 8:
            values.add(value)
    return sorted(values, key=len, reverse=True)


MIN_ENCODED_CHARS = 8  # shorter encoded fragments would mask ordinary output by chance


def encoded_forms(value: str) -> set[str]:
    """The texts a command could print `value` as: itself, hex (both cases), URL-encoded,
    and base64 (standard and URL-safe). Base64 of a value embedded at any offset in other
    bytes shares a stable core, one per offset modulo 3; the core is what is masked."""
    raw = value.encode()
    forms = {value, raw.hex(), raw.hex().upper(), quote(value, safe=""), quote(value)}
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        # 4-character groups made only of the value's bytes: groups start every 3 bytes.
        first = -(-shift // 3)  # the first group that starts at or after the value
        last = (shift + len(raw)) // 3  # groups before this one end inside the value
        core = encoded[first * 4 : last * 4]
        if len(core) >= MIN_ENCODED_CHARS:
            forms.update((core, core.replace("+", "-").replace("/", "_")))
    return {form for form in forms if len(form) >= MIN_ENCODED_CHARS}


def mask_secrets(output: str, values: list[str]) -> str:
    """Replace every secret, in every encoded form, with a marker (longest forms first)."""
    forms = sorted(
        {form for value in values for form in encoded_forms(value)}, key=len, reverse=True
    )
    for form in forms:
        output = output.replace(form, "[secret hidden]")
    return output


class CappedOutput:
    """Keeps the first and the last `limit/2` characters of a stream, counts the rest."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_size += len(chunk)
            while self.tail and self.tail_size - len(self.tail[0]) >= self.half:
                self.tail_size -= len(self.tail.popleft())

    def text(self) -> str:
        tail = b"".join(self.tail)
        if len(tail) > self.half:
            tail = tail[-self.half :]
        omitted = self.total - len(self.head) - len(tail)
        head = self.head.decode("utf-8", "replace")
        if omitted <= 0:
            return head + tail.decode("utf-8", "replace")
        return f"{head}\n[... {omitted} bytes of output omitted ...]\n{tail.decode('utf-8', 'replace')}"


def run_command(
    command: str, workspace: str, *, timeout: float, max_output: int
) -> tuple[int | None, str, bool]:
    """Run `command` with bash in `workspace`: (exit code or None, capped output, timed out)."""
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=workspace,
        env=child_environment(workspace),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=drop_ptrace_capability,
    )
    output = CappedOutput(max_output)
    timed_out = False
    try:
        with gevent.Timeout(timeout):
            while True:
                chunk = (
                    process.stdout.read1(65536)
                    if hasattr(process.stdout, "read1")
                    else process.stdout.read(65536)
                )
                if not chunk:
                    break
                output.add(chunk)
            process.wait()
    except gevent.Timeout:
        timed_out = True
    finally:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the command and whatever it started
            except ProcessLookupError:
                pass
            process.wait()
        process.stdout.close()
    return (None if timed_out else process.returncode), output.text(), timed_out


def _bash(arguments: dict, context: ToolContext) -> str:
    command = arguments.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolFailure("invalid_arguments", "Error: give the command to run.")
    try:
        workspace = workspace_root(context)
    except WorkspaceError as exc:
        raise ToolFailure(exc.code, f"Error: {exc}") from None
    config = current_app.config
    limit = config["NUMI_BASH_TIMEOUT_SECONDS"]
    asked = arguments.get("timeout")
    timeout = min(float(asked), limit) if isinstance(asked, int | float) and asked > 0 else limit
    code, output, timed_out = run_command(
        command, workspace, timeout=timeout, max_output=config["NUMI_BASH_MAX_OUTPUT_CHARS"]
    )
    output = mask_secrets(output, secret_values())
    status = f"timed out after {timeout:g} s (killed)" if timed_out else f"exit code {code}"
    text = f"[{status}]\n{output}" if output else f"[{status}] (no output)"
    if timed_out or code != 0:
        # The output is still the model's to read; the result is marked failed.
        raise ToolFailure("timeout" if timed_out else "exit_status", text)
    return text


BASH = Tool(
    name="bash",
    description=(
        "Run a bash command in the chat's workspace directory (the user approves each command). "
        "Returns the exit code and the output (stdout and stderr; long output keeps its start and end)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line, run with bash -c."},
            "timeout": {
                "type": "number",
                "description": "Seconds before the command is killed (capped by the server).",
            },
        },
        "required": ["command"],
    },
    run=_bash,
    needs_approval=True,
    admin_only=True,
    timeout=24
    * 3600,  # the command has its own timeout (NUMI_BASH_TIMEOUT_SECONDS); this only backs it up
)
