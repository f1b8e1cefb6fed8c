"""pedl's web UI: pages and a JSON API over the scheduler's gRPC API, as the signed-in user."""
