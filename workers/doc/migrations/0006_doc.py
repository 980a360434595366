"""doc: documents, their pages, per-language full-text columns (issue 7)

Revision ID: 0006_doc
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006_doc"
down_revision = "0001"
branch_labels = None
depends_on = None

DOCUMENT_STATUSES = "'UPLOADED', 'PROCESSING', 'FINALIZING', 'READY', 'FAILED'"
PAGE_STATUSES = "'PENDING', 'DONE', 'FAILED'"
PAGE_METHODS = "'text-layer', 'ocr'"


def _now(name: str, nullable: bool = False) -> sa.Column[object]:
    default = None if nullable else sa.text("now()")
    return sa.Column(name, sa.DateTime(timezone=True), server_default=default, nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "documents",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("file_object_id", sa.UUID(), nullable=False),
        sa.Column("filename", sa.Text(), nullable=True),
        # Extractor of doc:extract_structured (invoice, quote, auto = pick by content).
        sa.Column("schema_name", sa.String(64), server_default="auto", nullable=False),
        sa.Column("status", sa.String(16), server_default="UPLOADED", nullable=False),
        sa.Column("pages_total", sa.Integer(), nullable=True),
        # Fan-in counter: pages finished (DONE or FAILED), each counted once (see workers/doc/store.py).
        sa.Column("pages_done", sa.Integer(), server_default="0", nullable=False),
        sa.Column("pages_failed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("language", sa.String(8), nullable=True),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("extracted", postgresql.JSONB(), nullable=True),
        _now("extracted_at", nullable=True),
        _now("indexed_at", nullable=True),
        _now("created_at"),
        _now("updated_at"),
        _now("finished_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_documents"),
        sa.ForeignKeyConstraint(
            ["file_object_id"], ["file_objects.id"], name="fk_documents_file_object_id"
        ),
        sa.CheckConstraint(f"status IN ({DOCUMENT_STATUSES})", name="ck_documents_status"),
        sa.CheckConstraint(
            "pages_done >= 0 AND pages_failed >= 0 AND pages_failed <= pages_done "
            "AND (pages_total IS NULL OR pages_done <= pages_total)",
            name="ck_documents_pages",
        ),
    )
    op.create_index("ix_documents_org_created", "documents", ["org_id", "created_at"])
    op.create_table(
        "document_pages",
        sa.Column("document_id", sa.UUID(), nullable=False),
        sa.Column("page", sa.Integer(), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("status", sa.String(16), server_default="PENDING", nullable=False),
        sa.Column("method", sa.String(16), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        # 1.0 for a text layer; Tesseract's mean word confidence (0..1) for OCR.
        sa.Column("confidence", sa.Float(), nullable=True),
        # fr, en, or und (undetermined: indexed in both languages).
        sa.Column("language", sa.String(8), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("tsv_fr", postgresql.TSVECTOR(), nullable=True),
        sa.Column("tsv_en", postgresql.TSVECTOR(), nullable=True),
        _now("created_at"),
        _now("finished_at", nullable=True),
        sa.PrimaryKeyConstraint("document_id", "page", name="pk_document_pages"),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["documents.id"],
            name="fk_document_pages_document_id",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(f"status IN ({PAGE_STATUSES})", name="ck_document_pages_status"),
        sa.CheckConstraint(
            f"method IS NULL OR method IN ({PAGE_METHODS})", name="ck_document_pages_method"
        ),
        sa.CheckConstraint("page >= 1", name="ck_document_pages_page"),
    )
    op.create_index("ix_document_pages_org", "document_pages", ["org_id"])
    op.create_index(
        "ix_document_pages_tsv_fr", "document_pages", ["tsv_fr"], postgresql_using="gin"
    )
    op.create_index(
        "ix_document_pages_tsv_en", "document_pages", ["tsv_en"], postgresql_using="gin"
    )


def downgrade() -> None:
    op.drop_table("document_pages")
    op.drop_table("documents")
