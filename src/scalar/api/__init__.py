"""HTTP API routes."""
