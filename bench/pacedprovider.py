"""The scripted provider in a process of its own, for benchmarks whose own process must
not share a CPU budget with the streams (bench/scaleout.py's capacity search).

    python bench/pacedprovider.py TOKENS

Every chat request is answered with TOKENS equal-width tokens at 20 per second (bench/
load.py's `paced`), each stamped with time.perf_counter() (CLOCK_MONOTONIC, comparable
across processes) when written. Prints the port, then answers commands on stdin, one a line:
`stamps` prints one JSON line {last user message: [stamp, ...]} for the requests since
the last `stamps` and forgets them; end of input stops the server.

gevent runs the server's threads as greenlets: hundreds of paced streams cost far less
CPU than as OS threads.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from gevent.fileobject import FileObject  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import paced  # noqa: E402
from numi.testing import ScriptedProvider  # noqa: E402
from numi.testing.conversation import last_user_text  # noqa: E402


def main() -> None:
    tokens = int(sys.argv[1])
    provider = ScriptedProvider(default_scenario=lambda request: paced(tokens)).start()
    print(provider.port, flush=True)
    commands = FileObject(sys.stdin.fileno(), "r")  # cooperative: the hub keeps serving
    try:
        for command in commands:
            if command.strip() == "stamps":
                taken, provider.requests[:] = list(provider.requests), []
                print(
                    json.dumps(
                        {
                            last_user_text(r.protocol, r.body): r.delta_times
                            for r in taken
                            if r.protocol
                        }
                    ),
                    flush=True,
                )
    finally:
        provider.stop()


if __name__ == "__main__":
    main()
