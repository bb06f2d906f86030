"""The Redis turn table's key layout: chats spread over hash-tag groups (see `shared` for
every key and what it holds)."""

from __future__ import annotations

import zlib

# Chats are spread over this many groups, each a Redis Cluster hash tag (`{n}`): every key
# a script or an XREAD touches is in one group, so a cluster can shard the groups across
# its nodes, and one XREAD per group and process follows all its chats. 16 groups let up
# to 16 masters share the load; more would cost each process more readers.
GROUPS = 16


# One Redis server takes an XREAD over keys of every group, so a process reads all its
# chats with one; a Redis Cluster refuses keys of several slots in one command, and would
# need one reader per group (READERS = GROUPS).
READERS = 1


def chat_group(chat_id: str) -> int:
    return zlib.crc32(chat_id.encode()) % GROUPS


def chat_key(prefix: str, chat_id: str, name: str) -> str:
    """A chat's key (`name`: seq, events, turn, lease), tagged with the chat's group."""
    return f"{prefix}{{{chat_group(chat_id)}}}c:{chat_id}:{name}"
