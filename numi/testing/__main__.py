"""`python -m numi.testing --port 8765` (and `numi dev fake-provider`): run the scripted
provider in the foreground with the demo answers."""

from __future__ import annotations

import argparse
import sys

from .demo import demo_scenario
from .server import ScriptedProvider


def serve(
    host: str = "127.0.0.1", port: int = 8765, *, tokens_per_second: float | None = None
) -> None:
    """Serve demo answers until interrupted."""
    provider = ScriptedProvider(
        host, port, default_scenario=demo_scenario(tokens_per_second)
    ).start()
    host, port = provider.host, provider.port
    print(
        f"Scripted provider on http://{host}:{port}\n"
        f"  OpenAI-compatible base URL: http://{host}:{port}/v1\n"
        f"  Anthropic base URL:         http://{host}:{port}",
        flush=True,
    )
    try:
        provider.wait()
    except KeyboardInterrupt:
        pass
    finally:
        provider.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="numi dev fake-provider", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--tokens-per-second",
        "--tps",
        type=float,
        default=None,
        help="pace answers (default: as fast as possible)",
    )
    args = parser.parse_args(argv)
    serve(args.host, args.port, tokens_per_second=args.tokens_per_second)
    return 0


if __name__ == "__main__":
    sys.exit(main())
