"""The floor for the per-event benchmarks: a bare WebSocket echo on the stack Numi serves
with (gevent's WSGI server and simple_websocket, which flask-sock wraps), no Flask, no
database. Every frame a client sends comes straight back. Per event it reads one
WebSocket frame and writes one, about the least a relay can do per token.

    python bench/echo.py PORT
"""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402

from gevent.pywsgi import WSGIServer  # noqa: E402
from simple_websocket import ConnectionClosed, Server  # noqa: E402


def app(environ, start_response):
    if environ.get("HTTP_UPGRADE", "").lower() != "websocket":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"echo"]
    ws = Server(environ)  # as flask-sock does
    try:
        while True:
            message = ws.receive()
            if message is None:
                break
            ws.send(message)
        ws.close()
    except ConnectionClosed:
        pass
    return []  # the socket is the response; pywsgi writes nothing more (flask-sock's way)


if __name__ == "__main__":
    WSGIServer(("127.0.0.1", int(sys.argv[1])), app, log=None).serve_forever()
