"""WSGI entry point in a checkout: `gunicorn -k gevent app:app` or `flask --app app ...`.

The app is numi/wsgi.py's (`numi.wsgi:app` works from any directory, installed or not).
Under gunicorn's gevent worker the worker monkey-patches before loading this module.
"""

from numi.wsgi import app  # noqa: F401
