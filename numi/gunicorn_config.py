"""gunicorn's settings for Numi: `gunicorn -c python:numi.gunicorn_config -k gevent
numi.wsgi:app`. A module of the package, not a `gunicorn.conf.py` in the working directory,
so a wheel install has it too, from any directory. Only what Numi needs: settings checked
before gunicorn starts, answers kept on disk written back as each worker starts, and the
graceful stop of running turns."""

import subprocess
import sys

# SIGTERM: running answers get NUMI_SHUTDOWN_GRACE_SECONDS (10 s), then are saved as
# interrupted; gunicorn must not kill the worker before that is done.
graceful_timeout = 30


def post_worker_init(worker):
    from numi.recovery import restore  # lazy: gevent patch order
    from numi.shutdown import gunicorn_worker_ready  # lazy: gevent patch order

    # `numi serve` writes kept answers back at its start (database.upgrade); a worker does
    # it here, under the recovery directory's lock, so each is written back once.
    restore(worker.wsgi)
    gunicorn_worker_ready(worker)
    from numi.services import services  # lazy: gevent patch order

    # Every worker runs due tasks; each due time is claimed by one (numi/tasks/runs.py).
    services(worker.wsgi).task_scheduler.start()
    import gevent  # lazy: gevent patch order
    from numi.agent.research_resume import keep_resuming  # lazy: gevent patch order

    # Research runs a stop or crash cut short go on (one worker takes each chat's turn).
    gevent.spawn(keep_resuming, worker.wsgi)


def _refuse_unusable_settings() -> None:
    """A setting, data directory or database URL Numi cannot use stops gunicorn here, as
    it is read, in one line with exit status 2 (numi/settings_check.py, in a child process:
    this master imports nothing of Numi before the workers patch with gevent). Without this
    each worker printed a traceback and gunicorn exited 3."""
    checked = subprocess.run([sys.executable, "-m", "numi.settings_check"], check=False)
    if checked.returncode:
        sys.exit(checked.returncode)


_refuse_unusable_settings()
