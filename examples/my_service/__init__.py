"""The example service of docs/endpoints.md's quick start (``my_service.handlers:square``)."""
