"""Dashboard templates and static assets."""
