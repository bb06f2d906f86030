"""Uploaded files and the search-indexing state of documents."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ForeignKey,
    Index,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import IDS_NEVER_REUSED, iso, utcnow


class Attachment(db.Model):
    __tablename__ = "attachments"
    __table_args__ = (Index("ix_attachments_user_sha", "user_id", "sha256"), IDS_NEVER_REUSED)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    filename: Mapped[str] = mapped_column(String(255))
    mime: Mapped[str] = mapped_column(String(100))
    size: Mapped[int]
    sha256: Mapped[str] = mapped_column(String(64))
    storage_path: Mapped[str] = mapped_column(String(500))
    extracted_text: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "filename": self.filename,
            "mime": self.mime,
            "size": self.size,
            "sha256": self.sha256,
            "created_at": iso(self.created_at),
        }


class DocumentIndex(db.Model):
    """Search-indexing state of one uploaded document (its chunks live in fts_document_chunks)."""

    __tablename__ = "document_index"

    attachment_id: Mapped[int] = mapped_column(
        ForeignKey("attachments.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(
        String(16), default="pending"
    )  # pending|indexing|done|error
    chunks: Mapped[int] = mapped_column(default=0)  # chunks indexed so far
    chunks_total: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(Text)
    indexed_at: Mapped[datetime | None]
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The vectors of its chunks (numi/knowledge/embedding.py): None before any try, "indexing",
    # "done", or "pending" with the reason in embedding_error (an endpoint down, a wrong
    # dimension, a rate limit: full-text search goes on meanwhile).
    embedding_status: Mapped[str | None] = mapped_column(String(16))
    embedding_error: Mapped[str | None] = mapped_column(Text)
    embedding_model: Mapped[str | None] = mapped_column(String(300))  # the model of its vectors
    embedded_chunks: Mapped[int] = mapped_column(default=0, server_default="0")


class DocumentChunk(db.Model):
    """Where one chunk of a document was found, and its vector (its text is in
    fts_document_chunks, under the same attachment id and chunk number)."""

    __tablename__ = "document_chunks"
    __table_args__ = (Index("ix_document_chunks_user_model", "user_id", "model"),)

    attachment_id: Mapped[int] = mapped_column(
        ForeignKey("attachments.id", ondelete="CASCADE"), primary_key=True
    )
    chunk: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    heading: Mapped[str | None] = mapped_column(Text)  # "Part › Section", or "def name" in code
    page: Mapped[int | None]
    line_start: Mapped[int | None]
    line_end: Mapped[int | None]
    # The model that made `vector` (float32, unit length) and its dimension: a vector of
    # another model is never compared with a query's.
    model: Mapped[str | None] = mapped_column(String(300))
    dim: Mapped[int | None]
    vector: Mapped[bytes | None] = mapped_column(LargeBinary)
