"""Sinks that do more than append panes: a current-results table in PostgreSQL (postgres.py)."""
