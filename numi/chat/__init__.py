"""Chats: loading, editing, context, compaction, export."""
