"""Builders for context tests: users, chats and messages written straight to the database."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

from turn_support import ACCESS_TOKEN

from numi.extensions import db
from numi.models import Chat, Message, User


def make_user(name: str = "ctx") -> int:
    user = User(username=f"{name}-{uuid.uuid4().hex[:6]}", password_hash="x")
    db.session.add(user)
    db.session.commit()
    return user.id


def make_chat(user_id: int, **settings) -> str:
    chat = Chat(
        user_id=user_id, title="t", settings_json=json.dumps(settings) if settings else None
    )
    db.session.add(chat)
    db.session.commit()
    return chat.id


def add(chat_id: str, role: str, content: str = "", **fields) -> int:
    message = Message(
        chat_id=chat_id, role=role, content=content, tool_call_id=fields.pop("tool_call_id", None)
    )
    for name, value in fields.items():
        setattr(message, name, value)
    db.session.add(message)
    db.session.commit()
    return message.id


def tool_call(call_id: str, name: str = "lookup") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def upload(
    base_url: str,
    filename: str,
    data: bytes,
    mime: str = "application/octet-stream",
    headers: dict | None = None,
    token: str | None = ACCESS_TOKEN,
) -> tuple[int, dict]:
    """POST one file to /api/upload as multipart form data (a real HTTP request), with the
    access token as a bearer header (`token=None`: none)."""
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            f"Content-Type: {mime}\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        base_url + "/api/upload",
        data=body,
        method="POST",
        headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            **({"Authorization": f"Bearer {token}"} if token else {}),
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def minimal_pdf(text: str) -> bytes:
    """A minimal valid one-page PDF showing `text` (Helvetica), with a correct xref table."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return pdf_file(objects)


def pdf_file(objects: list[bytes]) -> bytes:
    """A PDF file of `objects` (numbered from 1; the first is the catalog), with its xref
    table and trailer."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


def png(width: int, height: int) -> bytes:
    from PIL import Image
    import io

    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


def bomb_pdf(pages: int, inflated_bytes: int, text: str = "Intro page 4711") -> bytes:
    """A PDF whose first page shows `text` and whose other `pages - 1` pages share one
    FlateDecode content stream that inflates to `inflated_bytes` of text operators: a
    decompression bomb of a few hundred KB."""
    import zlib

    first = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    unit = b"BT /F1 1 Tf 0 0 Td (bomb) Tj ET\n"
    packed = zlib.compressobj(9)
    body = packed.compress(unit * (inflated_bytes // len(unit))) + packed.flush()
    kids = " ".join(f"{n} 0 R" for n in range(6, 6 + pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length " + str(len(first)).encode() + b" >>\nstream\n" + first + b"\nendstream",
        b"<< /Length "
        + str(len(body)).encode()
        + b" /Filter /FlateDecode >>\nstream\n"
        + body
        + b"\nendstream",
    ]
    for n in range(pages):
        contents = 4 if n == 0 else 5
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {contents} 0 R "
            f"/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
    return pdf_file(objects)
