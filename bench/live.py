"""A live Numi for benchmarks: `numi serve` in a subprocess on loopback, a fresh data
directory, an endpoint pointing at the scripted provider, and a small JSON API client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Single-user mode needs an access token on every request; the benchmarks send this one.
ACCESS_TOKEN = "bench-access-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveNumi:
    TOKEN = ACCESS_TOKEN  # single-user mode needs one; programs send it as a bearer

    def __init__(self, **env: str):
        self.port = free_port()
        self.data_dir = tempfile.mkdtemp(prefix="numi-bench-")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("NUMI_")}
        self.env.update(
            NUMI_DATA_DIR=self.data_dir,
            NUMI_PORT=str(self.port),
            NUMI_AUTO_ENDPOINTS="0",
            NUMI_LOG_LEVEL="WARNING",
            NUMI_GENERATE_TITLES="0",
            NUMI_ACCESS_TOKEN=ACCESS_TOKEN,
        )
        self.env.update({k: str(v) for k, v in env.items()})
        self.url = f"http://127.0.0.1:{self.port}"
        # What a program sends (a browser shows the token once, then has a cookie).
        self.headers = {"Authorization": f"Bearer {ACCESS_TOKEN}"}
        self.proc: subprocess.Popen | None = None
        self.endpoints: dict[tuple[str, str], int] = {}

    def command(self) -> list[str]:
        return [str(Path(sys.executable).with_name("numi")), "serve"]

    def cli(self, *args: str, input: str | None = None) -> str:
        """Run a `numi` command on this server's data (its stdout, stripped)."""
        command = [str(Path(sys.executable).with_name("numi")), *args]
        done = subprocess.run(
            command, input=input, env=self.env, text=True, check=True, capture_output=True
        )
        return done.stdout.strip()

    def add_user(self, name: str, password: str, *, admin: bool = False) -> str:
        """A multi-user server's new user, made with the command line; their API token."""
        flags = ["--admin"] if admin else []
        self.cli("user", "create", name, "--password-stdin", *flags, input=password + "\n")
        return self.cli("token", "create", "--user", name)

    def start(self, timeout: float = 120) -> float:
        """Start the server; returns seconds from process start to the first HTTP 200."""
        started = time.perf_counter()
        # BENCH_SERVER_LOG=FILE keeps the server's log (errors under load), else it is dropped.
        with open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "a") as log:
            self.proc = subprocess.Popen(
                self.command(), env=self.env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log
            )
        while True:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return time.perf_counter() - started
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.command()[-1]} exited")
                if time.perf_counter() - started > timeout:
                    self.stop()
                    raise RuntimeError(f"no answer from {self.url} within {timeout:.0f} s")
                time.sleep(0.005)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # a server stuck under load still goes
                self.proc.kill()
                self.proc.wait(10)

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **self.headers},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def ws_headers(self) -> dict[str, str]:
        return {"Origin": self.url, **self.headers}

    def chat_on(self, base_url: str, kind: str = "openai_chat", model: str = "bench-model") -> str:
        # One endpoint per provider, as a user has: chats on it share one SDK client.
        key = (base_url, kind)
        if key not in self.endpoints:
            self.endpoints[key] = self.post(
                "/api/endpoints",
                {
                    "name": f"bench-{kind}-{time.time_ns()}",
                    "kind": kind,
                    "base_url": base_url,
                    "api_key": "bench",
                    "default_model": model,
                },
            )["id"]
        return self.post("/api/session", {"endpoint_id": self.endpoints[key], "model": model})["id"]

    def __enter__(self) -> "LiveNumi":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
