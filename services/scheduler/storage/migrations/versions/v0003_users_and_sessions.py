"""Users, their sessions (only a hash of each token is kept), and who owns an experiment.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer, "sqlite"),
            sa.Identity(always=False),
            primary_key=True,
        ),
        sa.Column("username", sa.Text, nullable=False, unique=True),
        sa.Column("password_hash", sa.Text, nullable=False),
        sa.Column("admin", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("created_at", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "sessions",
        sa.Column("token_hash", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("expires_at", sa.Float(precision=53), nullable=False),
    )
    op.create_index("sessions_user", "sessions", ["user_id"])
    op.add_column("experiments", sa.Column("owner", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("experiments", "owner")
    op.drop_table("sessions")
    op.drop_table("users")
