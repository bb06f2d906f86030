"""Python kernels, one per chat: started on first use, spoken to over the Jupyter protocol.

A kernel is `python -m ipykernel_launcher` started by Numi itself (gevent.subprocess, in its
own session, with the sandbox of `sandbox.py` and the environment allow-list of bash), with
a connection file whose channels are Unix sockets (`ipc`). Numi speaks the protocol with
jupyter_client's `Session` (message signing and framing) over `zmq.green` sockets, so a
kernel's messages are waited for by the hub like any socket: no thread is held and the
hub never blocks, however long the code runs (jupyter_client's own clients would need an
asyncio loop or a thread each).

`KernelPool` (`pool.py`, one per app, `Services.kernels`) keeps this process's kernels by chat: at
most NUMI_CODE_MAX_KERNELS per user, each shut down after NUMI_CODE_IDLE_MINUTES unused (a
reaper greenlet runs only while kernels do). Nothing of jupyter_client or zmq is imported
until the first kernel starts, so an idle Numi's memory does not grow.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from gevent import subprocess
from gevent.lock import BoundedSemaphore

from .sandbox import child_setup, network_isolation

log = logging.getLogger(__name__)

START_SECONDS = 60  # a kernel that is not ready by then (a loaded machine) failed to start
GRACE_SECONDS = 5  # after an interrupt, before the kernel is killed
POLL_MS = 100  # how often a run looks at Stop, its clock and the process between messages


class KernelError(Exception):
    """A kernel that cannot be started or reached: `code` is stable, the text is the user's."""

    def __init__(self, code: str, text: str):
        super().__init__(text)
        self.code = code
        self.text = text


@dataclass
class Limits:
    wall_seconds: float
    cpu_seconds: float
    max_output_chars: int


@dataclass
class RunEvents:
    """What a run hands back as it goes: each IOPub message that belongs to it."""

    on_message: Callable[[str, dict[str, Any]], None]
    stop_requested: Callable[[], bool]
    output_full: Callable[[], bool]


@dataclass
class RunEnd:
    """How a run ended: `status` is ok, error, interrupted (Stop), timeout, cpu_limit,
    output_limit or died."""

    status: str
    execution_count: int | None = None
    killed: bool = False


@dataclass
class Kernel:
    chat_id: str
    user_id: int
    folder: str
    process: Any
    runtime_dir: str
    session: Any
    shell: Any
    iopub: Any
    last_used: float = field(default_factory=time.monotonic)
    lock: BoundedSemaphore = field(default_factory=BoundedSemaphore)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def cpu_seconds(self) -> float:
        """The kernel's CPU time so far (user + system), from /proc; 0 where there is none."""
        try:
            with open(f"/proc/{self.process.pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def interrupt(self) -> None:
        """SIGINT, as Jupyter's kernel manager sends it: a KeyboardInterrupt in the code."""
        if self.alive:
            try:
                os.kill(self.process.pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def execute(self, code: str, limits: Limits, events: RunEvents) -> RunEnd:
        """Run `code`; every IOPub message of this run goes to `events.on_message` as it
        arrives. Stop, the wall clock, the CPU time and an output flood interrupt it; a
        kernel that does not come back within GRACE_SECONDS of that is killed."""
        import zmq.green as zmq  # lazy: optional extra code

        message = self.session.msg(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        msg_id = message["header"]["msg_id"]
        self.session.send(self.shell, message)
        self.last_used = started = time.monotonic()
        cpu_start = self.cpu_seconds()
        reason: str | None = None  # why it was interrupted
        interrupted_at = 0.0
        failed = False
        count = None
        checked = started
        while True:
            received = self.iopub.poll(POLL_MS, zmq.POLLIN)
            if received:
                _, reply = self.session.recv(self.iopub, mode=zmq.NOBLOCK)
                if reply is not None and reply["parent_header"].get("msg_id") == msg_id:
                    kind, content = reply["header"]["msg_type"], reply["content"]
                    if kind == "status" and content.get("execution_state") == "idle":
                        break
                    if kind == "execute_input":
                        count = content.get("execution_count")
                    elif kind != "status":
                        failed = failed or kind == "error"
                        events.on_message(kind, content)
            now = time.monotonic()
            # Between messages, and every POLL_MS while they flood in: Stop and the limits.
            if received and now - checked < POLL_MS / 1000:
                continue
            checked = now
            if not self.alive:
                self.last_used = now
                return RunEnd("died", count)
            if reason is None:
                if events.stop_requested():
                    reason = "interrupted"
                elif now - started >= limits.wall_seconds:
                    reason = "timeout"
                elif events.output_full():
                    reason = "output_limit"
                elif self.cpu_seconds() - cpu_start >= limits.cpu_seconds:
                    reason = "cpu_limit"
                if reason is not None:
                    interrupted_at = now
                    self.interrupt()
            elif now - interrupted_at >= GRACE_SECONDS:
                self.kill()
                self.last_used = time.monotonic()
                return RunEnd(reason, count, killed=True)
        self._drain_shell()
        self.last_used = time.monotonic()
        if reason is not None:
            return RunEnd(reason, count)
        return RunEnd("error" if failed else "ok", count)

    def _drain_shell(self) -> None:
        import zmq.green as zmq  # lazy: optional extra code

        while self.shell.poll(0, zmq.POLLIN):
            self.session.recv(self.shell, mode=zmq.NOBLOCK)

    def kill(self) -> None:
        """End the kernel's process (and whatever it started: it leads its own session)."""
        if self.alive:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("kernel %s did not exit after SIGKILL", self.process.pid)

    def close(self) -> None:
        """Kill the process, close the sockets, remove the connection files."""
        self.kill()
        for socket in (self.shell, self.iopub):
            socket.close(linger=0)
        shutil.rmtree(self.runtime_dir, ignore_errors=True)


def kernel_environment(folder: str, runtime_dir: str, base: dict[str, str]) -> dict[str, str]:
    """bash's allow-listed environment (`base`), plus what a kernel needs of its own: its
    IPython and matplotlib state in its runtime folder, one BLAS thread, and its parent's
    pid (ipykernel exits when its parent is gone)."""
    env = dict(base)
    env.update(
        PWD=folder,
        IPYTHONDIR=os.path.join(runtime_dir, "ipython"),
        MPLCONFIGDIR=os.path.join(runtime_dir, "matplotlib"),
        MPLBACKEND="module://matplotlib_inline.backend_inline",
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        JPY_PARENT_PID=str(os.getpid()),
    )
    return env


def start_kernel(
    chat_id: str,
    user_id: int,
    folder: str,
    *,
    environment: dict[str, str],
    memory_bytes: int,
    isolate_network: bool,
) -> Kernel:
    """Start a kernel working in `folder` and wait until it answers on IOPub."""
    import zmq.green as zmq  # lazy: optional extra code
    from jupyter_client.connect import write_connection_file  # lazy: optional extra code
    from jupyter_client.session import Session  # lazy: optional extra code

    # Unix socket paths are short (108 bytes): the system's temporary folder, private.
    runtime_dir = tempfile.mkdtemp(prefix="numi-kernel-")
    key = secrets.token_hex(32)
    connection_file, info = write_connection_file(
        fname=os.path.join(runtime_dir, "connection.json"),
        transport="ipc",
        ip=os.path.join(runtime_dir, "k"),
        key=key.encode(),
    )
    isolate = isolate_network and network_isolation()
    try:
        log_file = open(os.path.join(runtime_dir, "kernel.log"), "wb")
        with log_file:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    connection_file,
                    "--HistoryManager.enabled=False",
                    "--IPKernelApp.quiet=True",
                ],
                cwd=folder,
                env=kernel_environment(folder, runtime_dir, environment),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=child_setup(memory_bytes, isolate),
            )
    except OSError as exc:
        shutil.rmtree(runtime_dir, ignore_errors=True)
        raise KernelError("kernel_start_failed", f"The Python kernel could not start: {exc}.")
    context: Any = zmq.Context.instance()
    session = Session(key=key.encode(), signature_scheme="hmac-sha256", username="numi")

    ports: dict[str, Any] = dict(info)

    def channel(kind: int, port_name: str):
        socket = context.socket(kind)
        socket.linger = 0
        socket.connect(f"ipc://{ports['ip']}-{ports[port_name]}")
        return socket

    shell = channel(zmq.DEALER, "shell_port")
    iopub = channel(zmq.SUB, "iopub_port")
    iopub.setsockopt(zmq.SUBSCRIBE, b"")
    kernel = Kernel(chat_id, user_id, folder, process, runtime_dir, session, shell, iopub)
    try:
        _wait_ready(kernel)
    except KernelError:
        kernel.close()
        raise
    return kernel


def _wait_ready(kernel: Kernel) -> None:
    """Ask for kernel_info until IOPub carries an answer: then the subscription is live and
    no output of the first run can be lost (ZeroMQ drops what a SUB socket joins late)."""
    import zmq.green as zmq  # lazy: optional extra code

    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if not kernel.alive:
            raise KernelError(
                "kernel_start_failed",
                "The Python kernel exited while starting: " + _log_tail(kernel.runtime_dir),
            )
        kernel.session.send(kernel.shell, "kernel_info_request", {})
        if kernel.iopub.poll(100, zmq.POLLIN):
            while kernel.iopub.poll(50, zmq.POLLIN):
                kernel.session.recv(kernel.iopub, mode=zmq.NOBLOCK)
            kernel._drain_shell()
            return
    raise KernelError("kernel_start_failed", "The Python kernel did not start in time.")


def _log_tail(runtime_dir: str) -> str:
    try:
        with open(os.path.join(runtime_dir, "kernel.log"), "rb") as handle:
            text = handle.read()[-600:].decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text.splitlines()[-1] if text else "no message."


def connection_info(kernel: Kernel) -> dict[str, Any]:
    """The kernel's connection file (for a bench or a debugging `jupyter console`)."""
    with open(os.path.join(kernel.runtime_dir, "connection.json")) as handle:
        return json.load(handle)
