"""The HTTP API (FastAPI): ``scalar.api.app.create_app(control_plane)``; see docs/api.md.

Kept light on purpose: ``scalar.api.client`` (the CLI's HTTP client) imports this package without FastAPI.
"""
