"""The ``scalar`` command."""
