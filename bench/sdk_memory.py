"""What the provider SDKs cost a server in memory: the RSS a fresh interpreter gains by
importing each adapter after what a running `numi serve` has already imported (so the
shared httpx, pydantic and the rest are not counted twice), and how many of the anthropic
SDK's `types.beta` modules come with it (issue 45: about 44 MiB of `import anthropic`).

    python bench/sdk_memory.py [--runs 3]

Each figure is a fresh process, so nothing one import leaves behind is counted in another.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from stats import row

ROOT = Path(__file__).resolve().parent.parent

# What a server has imported before its first anthropic turn: the app and the OpenAI
# adapters (every endpoint kind but one is OpenAI-shaped).
BASE = ("numi.cli", "numi.web", "numi.providers.openai_chat", "numi.providers.openai_responses")

_PROBE = """
import json, sys
def rss():
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
for name in sys.argv[1].split(','):
    if name:
        __import__(name)
before = rss()
for name in sys.argv[2].split(','):
    __import__(name)
print(json.dumps({
    'before': before,
    'after': rss(),
    'beta': sum(1 for m in sys.modules if m.startswith('anthropic.types.beta')),
    'anthropic': sum(1 for m in sys.modules if m == 'anthropic' or m.startswith('anthropic.')),
}))
"""


def imported(base: tuple[str, ...], extra: tuple[str, ...]) -> dict:
    """RSS (MiB) of a fresh interpreter with `base` imported, then with `extra` too."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, ",".join(base), ",".join(extra)],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


ADAPTER = "numi.providers.anthropic_messages"


def measure(runs: int = 3, base: tuple[str, ...] = BASE) -> list[dict]:
    """Rows for bench/run.py: the anthropic adapter's RSS after a server's imports (`base`),
    and `import anthropic` and `import openai` in a bare interpreter for scale."""
    adapter = [imported(base, (ADAPTER,)) for _ in range(runs)]
    bare = [imported((), ("anthropic",)) for _ in range(runs)]
    openai_bare = [imported((), ("openai",)) for _ in range(runs)]
    return rows(adapter, bare, openai_bare)


def rows(adapter: list[dict], bare: list[dict], openai_bare: list[dict]) -> list[dict]:
    """The rows from the probes' results (`imported`'s dicts): the adapter's, anthropic's
    and openai's, one per run."""
    beta = adapter[0]["beta"]
    return [
        row(
            "sdk memory",
            "anthropic adapter's RSS after a server's imports (app, OpenAI adapters)",
            [r["after"] - r["before"] for r in adapter],
            "MiB",
            note=f"{adapter[0]['anthropic']} anthropic modules loaded, {beta} of them "
            f"anthropic.types.beta; the server before it {adapter[0]['before']:.0f} MiB",
        ),
        row(
            "sdk memory",
            "`import anthropic` in a bare interpreter",
            [r["after"] - r["before"] for r in bare],
            "MiB",
            note="for scale: `import openai` in a bare interpreter "
            f"{sorted(r['after'] - r['before'] for r in openai_bare)[len(openai_bare) // 2]:.1f} MiB",
        ),
    ]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    for r in measure(args.runs):
        print(
            f"{r['metric']}: {r['median']:.1f} {r['unit']} ({r['min']:.1f}–{r['max']:.1f}); {r['note']}"
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(sys.argv[1:])
