"""`python tests/cli_host.py`: one process that runs many `numi` commands, for the tests.

A `numi` command in a process of its own spends about a second of CPU before it starts its
work (Python, gevent's patching, Flask, SQLAlchemy and both provider SDKs imported); the
tests run a few hundred. Here the real command group (`numi.cli.main`, patched first as the
console script is) is invoked by click's CliRunner once per request, each with exactly the
environment, stdin and arguments it was given, and answers with its exit status, stdout and
stderr. An exception that escapes a command is written to stderr as Python would print it,
so a test that says "no traceback" still sees one.

Requests arrive one JSON line each on stdin: {"args": [...], "input": str | null, "env": {}};
each answer is one JSON line: {"returncode": int, "stdout": str, "stderr": str}. Nothing a
command prints can reach the answers' pipe: file descriptor 1 is sent to stderr.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

from click.testing import CliRunner  # noqa: E402

from numi.cli import main  # noqa: E402


class _CommandStderr(logging.StreamHandler):
    """The root handler `create_app` would add (logging.basicConfig), writing to the stderr
    of the command that runs now, not to the first one's."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def run(request: dict) -> dict:
    os.environ.clear()
    os.environ.update(request["env"])
    # A process of its own would put PYTHONPATH on sys.path as it starts; this one started
    # with another command's environment, so each command's entries are added now (the turn
    # tests' NUMI_PLUGINS module, plugin_tools, is found only through them).
    for entry in reversed(request["env"].get("PYTHONPATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    # basicConfig in create_app sets the level only with the first handler: set it here.
    # A level logging does not know is the command's to refuse (invalid_setting), not the
    # host's to die of.
    try:
        logging.getLogger().setLevel(request["env"].get("NUMI_LOG_LEVEL", "INFO").upper())
    except ValueError:
        logging.getLogger().setLevel(logging.INFO)
    result = CliRunner().invoke(main, request["args"], input=request["input"], prog_name="numi")
    stderr = result.stderr
    returncode = result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
        returncode = 1
    return {"returncode": returncode, "stdout": result.stdout, "stderr": stderr}


def serve() -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    handler = _CommandStderr()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    for line in sys.stdin:
        answers.write(json.dumps(run(json.loads(line))) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve()
