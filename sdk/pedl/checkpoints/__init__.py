"""Client of pedl's checkpoint store: upload, download, get, list and delete checkpoints."""

from pedl.checkpoints.client import CHUNK_SIZE, CheckpointStoreClient
from pedl.checkpoints.errors import CheckpointError, CheckpointNotFound

__all__ = ["CHUNK_SIZE", "CheckpointError", "CheckpointNotFound", "CheckpointStoreClient"]
