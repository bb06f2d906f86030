"""run_python's cost: the first call of a chat (the kernel starts) and the overhead each
later call adds over a bare jupyter_client execute of the same code.

    python bench/kernel.py [--calls 200] [--runs 3]

Numi's side is the whole tool (`run_python` in an app context on a temporary data
directory: its folder scan before and after, the output collection, secret masking, the
result), under gevent as `numi serve` runs it. The floor is jupyter_client's own
BlockingKernelClient (`execute`, then IOPub read until the kernel is idle) against a kernel
started by its KernelManager, in a plain (unpatched) child process. Needs the `code` extra.
Target: at most 20 ms added per call.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stats import row, table  # noqa: E402

CODE = "total = sum(range(1000))\nprint(total)"

BARE = """
import json, sys, time
from jupyter_client.manager import start_new_kernel
started = time.perf_counter()
manager, client = start_new_kernel(kernel_name="python3")
client.execute_interactive("1", timeout=60, output_hook=lambda msg: None)
first = time.perf_counter() - started
calls = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter()
    msg_id = client.execute(sys.argv[2])
    while True:
        msg = client.get_iopub_msg(timeout=30)
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"):
            break
    client.get_shell_msg(timeout=30)
    calls.append(time.perf_counter() - t)
client.stop_channels(); manager.shutdown_kernel(now=True)
print(json.dumps({"first": first, "calls": calls}))
"""

NUMI = """
from gevent import monkey; monkey.patch_all()
import json, sys, tempfile, time
from numi import create_app
from numi.agent.tools import ToolContext
from numi.database import upgrade
from numi.services import services
app = create_app({"NUMI_DATA_DIR": tempfile.mkdtemp(), "NUMI_LOG_LEVEL": "WARNING"})
with app.app_context():
    upgrade(app)
    tool = services(app).tools.get("run_python")
    idle_imports = sorted(m for m in ("zmq", "jupyter_client", "ipykernel") if m in sys.modules)
    context = ToolContext(user_id=1, chat_id="bench", is_admin=True)
    started = time.perf_counter()
    tool.run({"code": "1"}, context)
    first = time.perf_counter() - started
    calls = []
    for _ in range(int(sys.argv[1])):
        t = time.perf_counter()
        tool.run({"code": sys.argv[2]}, context)
        calls.append(time.perf_counter() - t)
    services(app).kernels.shutdown()
print(json.dumps({"first": first, "calls": calls, "idle_imports": idle_imports}))
"""


def measure_one(script: str, calls: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", script, str(calls), CODE],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(calls: int = 200, runs: int = 3) -> list[dict]:
    firsts, bare_firsts, per_call, bare_per_call, added = [], [], [], [], []
    idle_imports: set[str] = set()
    for _ in range(runs):
        bare = measure_one(BARE, calls)
        numi = measure_one(NUMI, calls)
        bare_call = sorted(bare["calls"])[len(bare["calls"]) // 2] * 1000
        numi_call = sorted(numi["calls"])[len(numi["calls"]) // 2] * 1000
        firsts.append(numi["first"] * 1000)
        bare_firsts.append(bare["first"] * 1000)
        per_call.append(numi_call)
        bare_per_call.append(bare_call)
        added.append(numi_call - bare_call)
        idle_imports.update(numi["idle_imports"])
    # An idle Numi (the tool registered, no kernel yet) has imported none of the extra.
    idle = (
        "idle Numi imports none of zmq/jupyter_client/ipykernel"
        if not idle_imports
        else ("idle Numi imported " + ", ".join(sorted(idle_imports)))
    )
    return [
        row(
            "kernel",
            "first run_python of a chat (kernel start)",
            firsts,
            "ms",
            ratio=[a / b for a, b in zip(firsts, bare_firsts)],
            note="floor: jupyter_client start_new_kernel + execute",
        ),
        row(
            "kernel",
            f"run_python per call, median of {calls}",
            per_call,
            "ms",
            ratio=[a / b for a, b in zip(per_call, bare_per_call)],
            note="floor: BlockingKernelClient execute, IOPub to idle",
        ),
        row("kernel", "added per call over the floor", added, "ms", "≤ 20 ms", note=idle),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    print(table(measure(args.calls, args.runs)))
    print(f"({time.perf_counter() - started:.0f} s)")
