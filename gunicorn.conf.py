"""gunicorn's settings for Numi, read from the working directory (`gunicorn -k gevent
app:app` in the repository). Only what Numi needs: the graceful stop of running turns."""

# SIGTERM: running answers get NUMI_SHUTDOWN_GRACE_SECONDS (10 s), then are saved as
# interrupted; gunicorn must not kill the worker before that is done.
graceful_timeout = 30


def post_worker_init(worker):
    from numi.shutdown import gunicorn_worker_ready

    gunicorn_worker_ready(worker)
