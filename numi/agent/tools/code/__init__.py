"""`run_python`: run code in the chat's own IPython kernel (the optional `code` extra).

Variables and imports persist between calls and turns of one chat, as in a notebook. The
kernel (`kernels.py`) starts on the chat's first call, in the chat's workspace when it has
one (an administrator's chat), else in a folder of its own under the data directory
(`<data dir>/kernels/<user id>/<chat id>`), where the files attached to the chat are copied
into `attachments/`. What it prints streams to the card as it comes (`tool_output`);
images, tables and errors are shown on the card, files it writes are listed there for
download (`outputs.py`), and the model reads a capped text rendering.

It asks before running, like bash (the card shows the whole code, highlighted), unless the
chat says otherwise. Limits per call: wall time, CPU time, output size, code size, and the
kernel's memory (RLIMIT_AS); network off where the OS allows it (`sandbox.py`). A kernel
that died, was shut down idle, restarted from the chat header or lost with a server restart
is replaced on the next call, which says that the variables are gone.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
from typing import TYPE_CHECKING, Any

from flask import current_app

from ....services import services
from .. import Tool, ToolContext, ToolFailure, ToolResult
from ..bash import child_environment, mask_secrets, secret_values
from ..workspace import WorkspaceError, workspace_root
from .pool import KernelPool
from ....models import Attachment, Message
from ....extensions import db
from ....chat.attachments import store_generated
from ....chat.attachments import file_path
from ....lazy_modules import lazy_module

# The kernels' code (the Jupyter protocol, the sandbox) and the outputs' readers are loaded
# by the first call, not at start-up: the tool is registered with the app.
if TYPE_CHECKING:
    from . import kernels, outputs
    from .kernels import Kernel
else:
    kernels = lazy_module("numi.agent.tools.code.kernels")
    outputs = lazy_module("numi.agent.tools.code.outputs")

INSTALL_HINT = "pip install 'numi[code]'"
MARKER = ".numi-kernel"  # in the chat's state folder: a kernel ran here before

# A run's end -> its error code and what the model and the card are told ("ok" fails not).
ENDINGS = {
    "error": {"code": "python_error", "text": "The code raised an exception."},
    "interrupted": {
        "code": "interrupted",
        "text": "Stopped by the user; the kernel is still running.",
    },
    "timeout": {
        "code": "timeout",
        "text": "Interrupted: the code ran past the time limit of {wall:g} s.",
    },
    "cpu_limit": {
        "code": "cpu_limit",
        "text": "Interrupted: the code used more than {cpu:g} s of CPU time.",
    },
    "output_limit": {
        "code": "output_limit",
        "text": "Interrupted: the code printed more than the output limit.",
    },
    "died": {
        "code": "kernel_died",
        "text": "The kernel died (out of memory or a crash): variables are gone.",
    },
}
NOTICES = {
    "died": "The previous kernel died; this is a new one: variables are gone.",
    "idle": "The kernel was shut down after being idle; this is a new one: variables are gone.",
    "restart": "The kernel was restarted; variables are gone.",
}


# Installed packages do not change while the process runs, and find_spec stats the import path.
@functools.cache
def extra_installed() -> bool:
    """Whether the `code` extra (jupyter_client and ipykernel) is installed."""
    return all(importlib.util.find_spec(name) for name in ("jupyter_client", "ipykernel", "zmq"))


def state_folder(config, user_id: int, chat_id: str) -> str:
    """The chat's own folder under the data directory (its kernel's folder without a
    workspace), made private on first use."""
    folder = os.path.join(config["NUMI_DATA_DIR"], "kernels", str(user_id), chat_id)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def kernel_folder(context: ToolContext, config) -> str:
    """Where the chat's kernel works: its workspace (an administrator's chat with one),
    else its own folder."""
    if context.is_admin and context.workspace:
        try:
            return workspace_root(context)
        except WorkspaceError as exc:
            raise ToolFailure(exc.code, f"Error: {exc}") from None
    return state_folder(config, context.user_id, context.chat_id)


def _kernel(pool: KernelPool, context: ToolContext, folder: str, config) -> tuple[Kernel, str]:
    """The chat's running kernel, or a new one; and the notice its call carries."""
    kernel = pool.get(context.chat_id)
    if kernel is not None and kernel.user_id == context.user_id:
        return kernel, ""
    with pool.starting_lock(context.chat_id):
        kernel = pool.get(context.chat_id)
        if kernel is not None and kernel.user_id == context.user_id:
            return kernel, ""
        limit = config["NUMI_CODE_MAX_KERNELS"]
        if pool.count(context.user_id) >= limit:
            raise ToolFailure(
                "kernel_limit",
                f"Error: you have {limit} Python kernels running (the most allowed). Restart "
                "the kernel of a chat you no longer use (its header's menu), or wait until "
                "one is shut down idle.",
            )
        state = state_folder(config, context.user_id, context.chat_id)
        marker = os.path.join(state, MARKER)
        reason = pool.ended.get(context.chat_id) or ("restart" if os.path.exists(marker) else "")
        if folder == state:  # a workspace is the user's own project: nothing is added to it
            _copy_attachments(context, folder)
        try:
            kernel = kernels.start_kernel(
                context.chat_id,
                context.user_id,
                folder,
                environment=child_environment(folder),
                memory_bytes=config["NUMI_CODE_MEMORY_MB"] * 1024 * 1024,
                isolate_network=not config["NUMI_CODE_NETWORK"],
            )
        except kernels.KernelError as exc:
            raise ToolFailure(exc.code, f"Error: {exc.text}") from None
        pool.add(kernel, config["NUMI_CODE_IDLE_MINUTES"] * 60)
        with open(marker, "w"):
            pass
        return kernel, NOTICES.get(reason, "")


def _copy_attachments(context: ToolContext, folder: str) -> None:
    """The chat's attached files, readable by the code under `attachments/`."""

    rows = db.session.execute(
        db.select(Message.content_parts_json).where(
            Message.chat_id == context.chat_id, Message.role == "user"
        )
    ).scalars()
    ids = set()
    for raw in rows:
        try:
            parts = json.loads(raw) if raw else []
        except ValueError:
            continue
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "attachment":
                ids.add(part.get("id"))
    if not ids:
        return
    target = os.path.join(folder, "attachments")
    os.makedirs(target, exist_ok=True)
    data_dir = current_app.config["NUMI_DATA_DIR"]
    for row in db.session.execute(
        db.select(Attachment).where(Attachment.id.in_(ids), Attachment.user_id == context.user_id)
    ).scalars():
        path = os.path.join(target, os.path.basename(row.filename) or f"file-{row.id}")
        if not os.path.exists(path):
            try:
                with open(file_path(data_dir, row), "rb") as src, open(path, "wb") as dst:
                    dst.write(src.read())
            except OSError:
                continue


def _run_python(arguments: dict, context: ToolContext) -> ToolResult:
    code = arguments.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ToolFailure("invalid_arguments", "Error: give the Python code to run.")
    config = current_app.config
    if len(code) > config["NUMI_CODE_MAX_CHARS"]:
        raise ToolFailure(
            "code_too_large",
            f"Error: the code is {len(code)} characters; the limit is "
            f"{config['NUMI_CODE_MAX_CHARS']}. Write it to a file in smaller parts instead.",
        )
    folder = kernel_folder(context, config)
    pool: KernelPool = services().kernels
    kernel, notice = _kernel(pool, context, folder, config)
    secrets = secret_values()
    max_file = config["NUMI_CODE_MAX_FILE_BYTES"]

    def keep_file(name: str, mime: str, data: bytes) -> int | None:
        if len(data) > max_file:
            return None

        return store_generated(config, context.user_id, name, mime, data).id

    report = context.report
    collected = outputs.Collected(
        config["NUMI_CODE_MAX_OUTPUT_CHARS"],
        keep_file,
        report=(lambda stream, text: report(stream, mask_secrets(text, secrets)))
        if report
        else None,
    )
    limits = kernels.Limits(
        config["NUMI_CODE_TIMEOUT_SECONDS"],
        config["NUMI_CODE_CPU_SECONDS"],
        config["NUMI_CODE_MAX_OUTPUT_CHARS"],
    )
    with kernel.lock:
        before = outputs.folder_state(folder)
        end = kernel.execute(
            code, limits, kernels.RunEvents(collected.add, context.stop_requested, collected.full)
        )
        files = outputs.changed_files(folder, before, max_file, keep_file)
    if end.status == "died" or end.killed:
        pool.discard(context.chat_id, "died")
    display: dict[str, Any] = {
        "kind": "python",
        "status": end.status,
        "execution_count": end.execution_count,
        "notice": notice,
        "outputs": _masked(collected.outputs, secrets),
        "files": files,
    }
    text = mask_secrets(collected.model_text(), secrets)
    lines = [notice] if notice else []
    if text:
        lines.append(text)
    if files:
        lines.append(
            "Files written: " + ", ".join(f"{f['name']} ({f['size']} bytes)" for f in files)
        )
    if end.status == "ok":
        return ToolResult("\n".join(lines) or "(no output)", display=display)
    ending = ENDINGS[end.status]
    said = ending["text"].format(wall=limits.wall_seconds, cpu=limits.cpu_seconds)
    if end.killed:
        said += " It did not stop, so the kernel was killed: variables are gone."
    display["ended"] = said
    raise ToolFailure(ending["code"], "\n".join([*lines, f"[{said}]"]), display=display)


def _masked(outputs: list[dict[str, Any]], secrets: list[str]) -> list[dict[str, Any]]:
    if not secrets:
        return outputs
    for output in outputs:
        for key in ("text", "traceback", "evalue", "html", "source"):
            if isinstance(output.get(key), str):
                output[key] = mask_secrets(output[key], secrets)
    return outputs


RUN_PYTHON = Tool(
    name="run_python",
    description=(
        "Run Python code in this chat's Jupyter (IPython) kernel; the user approves each run "
        "unless the chat says otherwise. Variables and imports persist between calls. "
        "stdout/stderr, the last expression's value, errors, plots and tables are shown to "
        "the user; you get their text (images are described, and shown to you when you can see "
        "images). Files written in the working "
        "folder are offered to the user for download; the chat's attached files are in "
        "./attachments/. The network may be off."
    ),
    parameters={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python code (a cell)."}},
        "required": ["code"],
    },
    run=_run_python,
    needs_approval=True,
    admin_only=True,
    # The call has its own limits (NUMI_CODE_TIMEOUT_SECONDS, then a grace); this backs them up.
    timeout=24 * 3600,
)


def code_tool(config) -> Tool:
    """The tool as this app offers it: to every user only when an administrator said so."""
    return dataclasses.replace(RUN_PYTHON, admin_only=not config["NUMI_CODE_ALL_USERS"])
