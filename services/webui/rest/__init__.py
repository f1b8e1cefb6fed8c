"""Determined's REST API (`/api/v1`, `/info`) over pedl's scheduler: written from Determined's
published protos and their `google.api.http` mappings, for Determined's own `det` and SDK."""
