"""gunicorn's settings for Numi: `gunicorn -c python:numi.gunicorn_config -k gevent
numi.wsgi:app`. A module of the package, not a `gunicorn.conf.py` in the working directory,
so a wheel install has it too, from any directory. Only what Numi needs: the graceful stop
of running turns."""

# SIGTERM: running answers get NUMI_SHUTDOWN_GRACE_SECONDS (10 s), then are saved as
# interrupted; gunicorn must not kill the worker before that is done.
graceful_timeout = 30


def post_worker_init(worker):
    from numi.shutdown import gunicorn_worker_ready

    gunicorn_worker_ready(worker)
