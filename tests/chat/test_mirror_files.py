"""Attachments beside a mirrored chat's file (numi/chat/mirror_files.py): names that are
safe in any folder and show what they are, and a folder that follows what its chat shows."""

from __future__ import annotations

import hashlib

import pytest

from numi.chat.markdown_mirror import MARKER, ChatFile, write_files
from numi.chat.mirror_files import AttachedFile, safe_name, unique_names


@pytest.mark.parametrize(
    "given, safe",
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "etc passwd"),
        ("..\\..\\boot.ini", "boot.ini"),
        ("／etc／shadow", "etc shadow"),  # full-width slashes become slashes, then spaces
        (".bashrc", "bashrc"),
        ("...", "file-7"),
        ("", "file-7"),
        ("   \t\n", "file-7"),
        ("invoice\u202efdp.exe", "invoice fdp.exe"),  # a right-to-left override shown as a space
        ("pay\u200bpal.html", "pay pal.html"),  # zero-width space
        ("bell\x07\x00.txt", "bell.txt"),
        ("CON", "file-7 CON"),
        ("nul.tar.gz", "file-7 nul.tar.gz"),
        ("COM1.txt", "file-7 COM1.txt"),
        ("trailing dot. ", "trailing dot"),
        ("Résumé – 2024 (final).docx", "Résumé 2024 (final).docx"),
        ("日本語のファイル.txt", "日本語のファイル.txt"),
        ("a" * 300 + ".txt", "a" * 100 + ".txt"),
        ("x." + "y" * 40, "x." + "y" * 16),
        ('<img src=x onerror="1">.html', "img src x onerror 1.html"),
    ],
)
def test_a_name_is_safe_in_any_folder_and_shows_what_it_is(given, safe):
    assert safe_name(given, 7) == safe
    assert "/" not in safe and "\\" not in safe and not safe.startswith(".")


def test_names_alike_but_for_case_get_their_id():
    names = unique_names([(1, "Notes.txt"), (2, "notes.TXT"), (3, "NOTES"), (1, "Notes.txt")])
    assert names == {1: "Notes.txt", 2: "notes-2.TXT", 3: "NOTES"}


# A chat file as Numi writes it: a later write finds it again by the id in its front matter.
BODY = f'---\nid: "c1"\n{MARKER}\n---\n# Trip\n'


def _attached(tmp_path, attachment_id: int, name: str, data: bytes) -> AttachedFile:
    source = tmp_path / "store" / f"{attachment_id}.bin"
    source.parent.mkdir(exist_ok=True)
    source.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    return AttachedFile(attachment_id, name, source, len(data), digest)


def test_the_folder_follows_what_the_chat_shows(tmp_path):
    vault = tmp_path / "vault"
    plan = _attached(tmp_path, 1, "plan.txt", b"the plan")
    map_ = _attached(tmp_path, 2, "map.txt", b"the map")
    write_files(
        vault,
        [ChatFile("c1", vault.joinpath("Trip.md").relative_to(vault), BODY, (plan, map_))],
    )
    folder = vault / "Trip.files"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == {
        "plan.txt": b"the plan",
        "map.txt": b"the map",
    }
    # A copy changed by hand is made right again; one the chat no longer shows is trashed.
    (folder / "plan.txt").write_bytes(b"the plan!")
    write_files(
        vault, [ChatFile("c1", folder.with_name("Trip.md").relative_to(vault), BODY, (plan,))]
    )
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == {"plan.txt": b"the plan"}
    assert (vault / ".trash" / "Trip.files" / "map.txt").read_bytes() == b"the map"
    # No attachment left: no folder.
    write_files(vault, [ChatFile("c1", folder.with_name("Trip.md").relative_to(vault), BODY)])
    assert not folder.exists()
    assert (vault / ".trash" / "Trip.files" / "plan.txt").read_bytes() == b"the plan"
