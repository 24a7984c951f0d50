"""The HTTP API of `talent serve`: `app` (FastAPI app factory, routes), `keys` (API keys,
stored hashed), `schemas` (request/response models). Nothing is imported here: `talent keys`
reads the keys without importing FastAPI."""
