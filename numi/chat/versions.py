"""Versions of a transcript: the message tree behind the linear transcript.

A regenerate or an edit does not delete what it replaces: the replaced messages stay as an
inactive sibling branch. The tree lives in three columns of `messages` (see `Message`):
`parent_id` (the message a row followed when it was saved, 0 for a first message), `selected` (the version its
parent shows) and `active` (selected all the way up: the transcript). Reading the
transcript never walks the tree: it is the chat's rows with `Message.shown()`, by id, as
before versions existed. Only the writes that change a selection (regenerate, edit,
switch, deleting a version) walk it, once, over the chat's (id, parent, selected) columns.

Invariants: a parent's id is smaller than its children's (rows are saved, imported and
forked parents first), so one pass in id order settles `active`; among the siblings of a
row, exactly one is selected.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update

from ..extensions import db
from ..models import Message
from ..models.columns import loads

UPDATE_CHUNK = 500


@dataclass
class Version:
    """Where a message stands among its versions: `n` of `m`, and every version's id."""

    n: int
    m: int
    ids: list[int]

    @property
    def previous_id(self) -> int | None:
        return self.ids[self.n - 2] if self.n > 1 else None

    @property
    def next_id(self) -> int | None:
        return self.ids[self.n] if self.n < self.m else None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "m": self.m, "ids": self.ids}


@dataclass
class Node:
    id: int
    parent_id: int | None
    role: str
    selected: bool
    active: bool
    live: bool  # not deleted


def version_info(chat_id: str, messages: list[Message]) -> dict[int, Version]:
    """Version positions of the given messages that have live siblings (one indexed query).
    A row with no recorded parent (NULL: written by hand, bypassing the model) has none."""
    parents = {m.parent_id for m in messages if m.parent_id is not None}
    if not parents:
        return {}
    # No ORDER BY: sorting in SQL would make SQLite walk the chat's (chat_id, id) index
    # instead of seeking (chat_id, parent_id); a few sibling ids sort faster here.
    rows = db.session.execute(
        select(Message.id, Message.parent_id).where(
            Message.chat_id == chat_id, Message.deleted_at.is_(None), Message.parent_id.in_(parents)
        )
    )
    siblings: dict[int | None, list[int]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r.id):
        siblings[row.parent_id].append(row.id)
    info: dict[int, Version] = {}
    for message in messages:
        ids = siblings.get(message.parent_id, [])
        if len(ids) > 1 and message.id in ids:
            info[message.id] = Version(ids.index(message.id) + 1, len(ids), ids)
    return info


def load_tree(chat_id: str) -> dict[int, Node]:
    """Every row of the chat (deleted ones too) as a tree node, in id order."""
    rows = db.session.execute(
        select(
            Message.id,
            Message.parent_id,
            Message.role,
            Message.selected,
            Message.active,
            Message.deleted_at.is_(None).label("live"),
        )
        .where(Message.chat_id == chat_id)
        .order_by(Message.id)
    )
    return {
        r.id: Node(r.id, r.parent_id, r.role, bool(r.selected), bool(r.active), bool(r.live))
        for r in rows
    }


def children(tree: dict[int, Node], parent_id: int | None) -> list[Node]:
    return [n for n in tree.values() if n.parent_id == parent_id]


def path_to(tree: dict[int, Node], message_id: int) -> list[int]:
    """The ids from the first message down to `message_id` (its branch), top first."""
    path = []
    node = tree.get(message_id)
    while node is not None:
        path.append(node.id)
        node = tree.get(node.parent_id)
    path.reverse()
    return path


def descendants(tree: dict[int, Node], message_id: int) -> list[int]:
    """Every row below `message_id`, in every version (ids only grow downwards)."""
    below = {message_id}
    for node in tree.values():
        if node.parent_id in below:
            below.add(node.id)
    below.discard(message_id)
    return sorted(below)


def select_version(chat_id: str, message_id: int, parent_id: int | None) -> None:
    """Make `message_id` the version its parent shows, then settle `active` (caller commits)."""
    same_parent = Message.id == message_id if parent_id is None else Message.parent_id == parent_id
    db.session.execute(
        update(Message)
        .where(Message.chat_id == chat_id, same_parent)
        .values(selected=Message.id == message_id)
        .execution_options(synchronize_session=False)
    )
    refresh_active(chat_id)


def unselect_children(chat_id: str, parent_id: int | None) -> None:
    """Show none of `parent_id`'s children: the next saved row becomes the new version."""
    if parent_id is None:
        return  # a hand-written row with no recorded parent: nothing is known to replace
    same_parent = Message.parent_id == parent_id
    db.session.execute(
        update(Message)
        .where(Message.chat_id == chat_id, same_parent)
        .values(selected=False)
        .execution_options(synchronize_session=False)
    )
    refresh_active(chat_id)


def refresh_active(chat_id: str) -> None:
    """Recompute `active` from `selected` for the whole chat (caller commits)."""
    tree = load_tree(chat_id)
    state: dict[int, bool] = {}
    on, off = [], []
    for node in tree.values():
        parent_active = state.get(node.parent_id, True)  # a first message (parent 0) or unknown
        active = node.selected and parent_active
        state[node.id] = active
        if active != node.active:
            (on if active else off).append(node.id)
    for ids, value in ((on, True), (off, False)):
        for start in range(0, len(ids), UPDATE_CHUNK):
            db.session.execute(
                update(Message)
                .where(Message.id.in_(ids[start : start + UPDATE_CHUNK]))
                .values(active=value)
                .execution_options(synchronize_session=False)
            )
    db.session.expire_all()  # loaded rows must not keep the old flags


def turn_rows(tree: dict[int, Node], question_id: int) -> list[Node]:
    """The live rows the turns of a question saved below it, in every version: its answers,
    tool steps and results, up to (not including) the next question."""
    below, rows = {question_id}, []
    for node in tree.values():  # in id order: parents first
        if node.parent_id in below and node.role != "user" and node.live:
            below.add(node.id)
            rows.append(node)
    return rows


def continue_turn(chat_id: str, question_id: int) -> bool:
    """Make the transcript end with `question_id`'s own turn, so the next saved row
    continues it: its branch is shown (the question and the newest version of what its
    turn saved), and what was said after that turn stays as another version. A retried
    question whose turn a crash cut short is answered where it was asked, even after later
    turns. A turn that ended on a failed answer (an error saved on it, with whatever it had
    shown) is answered beside it: the retry's answer is that answer's next version, and the
    failure stays reachable through the version switcher, as a regenerated answer does.
    Returns whether anything changed (the caller commits)."""
    tree = load_tree(chat_id)
    if question_id not in tree:
        return False
    rows = turn_rows(tree, question_id)
    # Down the turn's selected rows. A row with no selected child below it (a regenerate
    # has just hidden the answers) is where the next answer goes.
    tip = question_id
    while following := next((n for n in rows if n.parent_id == tip and n.selected), None):
        tip = following.id
    if tip != question_id and tree[tip].parent_id is not None and is_failed_answer(tip):
        tip = tree[tip].parent_id  # the failed answer is set aside below
    changed = False
    for node_id in path_to(tree, tip):
        node = tree[node_id]
        if not node.selected:
            select_version(chat_id, node.id, node.parent_id)
            changed = True
    if any(n.parent_id == tip and n.selected for n in tree.values()):
        unselect_children(chat_id, tip)
        changed = True
    return changed


def continued_steps(chat_id: str, messages: list[Message]) -> set[int]:
    """The ids of the given answers that continue their turn's answer: an assistant message
    whose parent is a tool step or its result (the step after a tool call, or the final
    answer), so the page draws a turn's steps as one answer. One query at most, for parents
    not among `messages`."""
    roles = {m.id: m.role for m in messages}
    wanted = {
        m.parent_id
        for m in messages
        if m.role == "assistant" and m.parent_id and m.parent_id not in roles
    }
    if wanted:
        rows = db.session.execute(
            select(Message.id, Message.role).where(
                Message.chat_id == chat_id, Message.id.in_(wanted)
            )
        )
        roles.update({row.id: row.role for row in rows})
    return {
        m.id
        for m in messages
        if m.role == "assistant" and roles.get(m.parent_id) in ("assistant", "tool")
    }


def is_failed_answer(message_id: int) -> bool:
    """Whether the row is an answer its turn saved with an error (`meta.error`, kept as
    `partial` by the agent): what a Retry answers again, as the next version."""
    row = db.session.execute(
        select(Message.role, Message.meta_json, Message.tool_calls_json).where(
            Message.id == message_id
        )
    ).first()
    if row is None or row.role != "assistant" or row.tool_calls_json:
        return False
    meta = loads(row.meta_json, {})
    return bool(meta.get("partial") and meta.get("error"))
