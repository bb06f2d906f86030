"""The floor for the start-up benchmark: a bare Flask app with one route on gevent's WSGI
server, in the same virtualenv, started the way `numi serve` starts (monkey-patch first).

    python bench/bare.py PORT
"""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

from flask import Flask  # noqa: E402
from gevent.pywsgi import WSGIServer  # noqa: E402

app = Flask(__name__)


@app.get("/healthz")
def healthz():
    return {"ok": True}


if __name__ == "__main__":
    WSGIServer(("127.0.0.1", int(sys.argv[1])), app, log=None).serve_forever()
