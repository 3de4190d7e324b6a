"""Pydantic schemas of everything that crosses a process boundary: files, the HTTP API, the agent protocol.

Each module parses one format into the pure :mod:`scalar.domain` values and serialises decisions back.
"""
