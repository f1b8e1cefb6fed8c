"""Helpers the integration and e2e tests share: real processes, started and killed by PID."""
