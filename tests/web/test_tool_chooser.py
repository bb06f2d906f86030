"""The chat's tool chooser (issue 25, item 9): tools by their labels, the shipped ones in a
fixed order, and "(admin)" only where there are other users to tell apart."""

from __future__ import annotations

import re


def _choices(client) -> list[str]:
    chat = client.post("/api/session", json={"title": "Tools"}).get_json()
    page = client.get(f"/c/{chat['id']}").get_data(as_text=True)
    fieldset = re.search(r'<fieldset class="chat-tools".*?</fieldset>', page, re.S).group(0)
    labels = re.findall(
        r'<label class="check" title="[^"]*">\s*<input[^>]*>\s*(.*?)\s*</label>', fieldset, re.S
    )
    return [re.sub(r"<[^>]+>", "", label).strip() for label in labels]


def test_single_user_sees_labels_in_order_without_admin(client):
    labels = _choices(client)
    assert labels == [
        "Web search",
        "Fetch web pages",
        "Search my documents",
        "Current time",
        "Remember (propose a memory)",
        "Workspace: list files",
        "Workspace: read files",
        "Workspace: search files",
        "Workspace: write files",
        "Workspace: patch files",
        "Bash commands",
        "Code (run Python in a kernel)",  # the `code` extra is installed for the tests
    ]


def test_an_admin_among_users_sees_which_tools_are_theirs_alone(admin_client):
    labels = _choices(admin_client)
    assert "Bash commands (admin)" in labels and "Workspace: read files (admin)" in labels
    assert "Web search" in labels and "Web search (admin)" not in labels
    assert labels.index("Web search") < labels.index("Bash commands (admin)")
