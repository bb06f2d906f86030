"""`python tests/server_zygote.py`: one pre-imported process per worker that forks the tests'
`numi serve` processes.

A `numi` process spends about a second of CPU before its work starts (Python, gevent's
patching, Flask, SQLAlchemy and both provider SDKs imported); the suite started a few hundred
servers, a third of its CPU (issue 36). This process pays that once: it patches and imports
as `numi serve` does, and then forks a child per start. The child is a real process, so
SIGTERM, SIGKILL and SIGSTOP reach it as they would any server, and it dies for real. It
takes the start's argv, environment (os.environ replaced), working directory and log file
(stdout and stderr), then runs the real command group. Only this process can wait for its
children, so it reports each exit status.

The child starts from this process's state before any start, so no start sees another's.
What a fresh process would read from its environment as it starts (PYTHONPATH, PYTHON*,
GEVENT_*) was read here once. A start that would differ there is refused, and its test keeps
a process of its own (`LiveServer(own_process=True)`), as do the tests of a start itself.

Requests arrive one JSON line each on stdin: {"argv": [...], "env": {}, "cwd": str,
"log": str, "stderr": str (optional: a file of its own for stderr, else the log)}; the
answer is {"pid": int} or {"refused": str}. Exits are reported on the same stream as they
happen: {"exited": pid, "returncode": int} (-N for signal N, as Popen).
When stdin closes (the tests ended) the children still running are killed.
"""

from gevent import monkey

monkey.patch_all()

import gc  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pkgutil  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

import gevent.pywsgi  # noqa: E402, F401  (serve's server)
from gevent.os import fork_gevent  # noqa: E402

from flask import Flask  # noqa: E402

import numi  # noqa: E402
from numi.cli import main  # noqa: E402
from numi.resources import TEMPLATES, resource_dir  # noqa: E402
from numi.web import register  # noqa: E402

# What a start imports is imported once here: every module of numi (create_app, the views and
# serve import theirs lazily, for the patch order), and the libraries the start's migration
# check and pages load. Measured (CPU to /healthz): 2.0 s in a process of its own, 1.2 s
# forked after numi.cli alone, 0.6 s forked after these; this costs the zygote 4 s once.
# Not what makes an app or runs as it is imported: gunicorn's config and app, `python -m`.
_ENTRY_POINTS = ("numi.gunicorn_config", "numi.wsgi")
for _module in pkgutil.walk_packages(numi.__path__, "numi."):
    if _module.name not in _ENTRY_POINTS and not _module.name.endswith(".__main__"):
        importlib.import_module(_module.name)
for _library in ("alembic.command", "alembic.runtime.migration", "alembic.autogenerate"):
    importlib.import_module(_library)

# Every template compiled once here, into the process's compiled templates
# (numi/web/template_code.py), which each child inherits: a start's pages then cost their
# render, not their compile (about 35 ms a template, 141 templates: 5 s once per worker).
# A bare app with the web layer registered has the compile settings of every start's app.
_templates = Flask("numi", template_folder=str(resource_dir(TEMPLATES)))
register(_templates)
for _name in _templates.jinja_env.list_templates():
    _templates.jinja_env.get_template(_name)
del _templates

# What this process holds is out of the collector's sight in every child: a start's first full
# collection (numi.settle_heap_for_serving's, and any the app's making triggers) walked the
# 175,000 objects imported here, 110 ms of CPU a start, and wrote to every page it touched,
# which the child then copied. As Python's docs advise for a fork without exec.
gc.freeze()

# Unpatched: this process never runs gevent's hub, so no watcher of its own reaps a child.
_poll = monkey.get_original("select", "poll")
_waitpid = monkey.get_original("os", "waitpid")

# Read by the interpreter (or by gevent) as a process starts: a start must agree with this
# process on them. PYTHONPATH is compared separately; PYTHONUNBUFFERED changes nothing here
# (this process writes unbuffered).
_AT_START = ("PYTHON", "GEVENT_")


def refusal(env: dict[str, str]) -> str | None:
    """Why a start with this environment cannot be forked from here, or None."""
    for key in sorted(set(env) | set(os.environ)):
        if key.startswith(_AT_START) and key not in ("PYTHONPATH", "PYTHONUNBUFFERED"):
            if env.get(key) != os.environ.get(key):
                return f"{key} differs from the zygote's"
    ours = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    theirs = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if theirs[len(theirs) - len(ours) :] != ours:
        return "its PYTHONPATH does not end with the zygote's"
    # A new entry may only add modules: one that shadows an imported module (a copy of
    # numi, say) would be imported in a process of its own, and not here.
    for entry in theirs[: len(theirs) - len(ours)]:
        if entry in sys.path or not os.path.isdir(entry):
            continue
        for name in os.listdir(entry):
            module = name.removesuffix(".py")
            if module in sys.modules:
                return f"its PYTHONPATH entry {entry} shadows the imported module {module}"
    return None


def run_child(request: dict, keep_out: list[int]) -> int:
    """In the forked child: become the start, run `numi ARGV`, return the exit status."""
    for fd in keep_out:
        os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    if request.get("stderr"):  # a command whose stderr is tested apart from its stdout
        err = os.open(request["stderr"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(err, 2)
        os.close(err)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # A process of its own would put its PYTHONPATH on sys.path as it starts (the turn tests'
    # NUMI_PLUGINS module, plugin_tools, is found only through it).
    for entry in reversed(request["env"].get("PYTHONPATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    sys.argv = ["numi", *request["argv"]]
    try:
        main(request["argv"], prog_name="numi")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def serve() -> int | None:
    """The zygote's loop. Returns None when the tests are done, or (in a forked child) the
    child's exit status."""
    answers = os.dup(1)
    os.dup2(2, 1)  # nothing printed here can reach the answers' pipe
    watched: dict[int, int] = {}  # pidfd -> pid
    poll = _poll()
    poll.register(0, 1)  # POLLIN
    pending = b""

    def answer(message: dict) -> None:
        os.write(answers, (json.dumps(message) + "\n").encode())

    while True:
        for fd, _events in poll.poll():
            if fd in watched:
                pid = watched.pop(fd)
                poll.unregister(fd)
                os.close(fd)
                _, status = _waitpid(pid, 0)
                answer({"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})
                continue
            chunk = os.read(0, 65536)
            if not chunk:  # the tests ended: nothing must outlive them
                for pid in watched.values():
                    os.kill(pid, signal.SIGKILL)
                    _, status = _waitpid(pid, 0)
                    answer({"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})
                return None
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                reason = refusal(request["env"])
                if reason:
                    answer({"refused": reason})
                    continue
                pid = fork_gevent()
                if pid == 0:
                    return run_child(request, [answers, *watched])
                pidfd = os.pidfd_open(pid)  # readable once the child has exited
                watched[pidfd] = pid
                poll.register(pidfd, 1)
                answer({"pid": pid})


if __name__ == "__main__":
    status = serve()
    if status is not None:
        # A forked child leaves as a process of its own would: atexit handlers, flushed files.
        sys.exit(status)
    # The zygote itself has nothing to flush or close (its answers went out with os.write,
    # its children are reaped): leaving without the interpreter's clean-up of every numi
    # module spares each worker's end 1 s, and 10 s at load average 90.
    os._exit(0)
