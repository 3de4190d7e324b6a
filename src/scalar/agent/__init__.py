"""The node agent: runs assignments on one machine and talks to the controller over HTTP only."""
