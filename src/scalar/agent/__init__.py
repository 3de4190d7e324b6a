"""The node agent (``scalar agent``, docs/agent.md): runs the work Scalar placed on this machine.

It registers the host's facts with the controller (always dialling out), then heartbeats: each heartbeat
reports every assignment's state and usage, and the reply says what to run and what to stop. Work runs as
processes (no containers), each under a small supervisor (``scalar.agent.shim``) in its own session, so an
agent that dies and restarts re-adopts its children from its journal instead of orphaning or duplicating
them. Output goes to a file per assignment and is shipped to the controller by byte offset.

This package talks to the controller over HTTP only: it imports no engine, store, runtime or provider.
"""
