"""pedl's checkpoint store: checkpoint metadata and bytes on a pluggable storage backend."""
