"""The client commands (orders, offers, account, watch): a running service over its REST API.

Nothing here imports the server: only the standard library, httpx, httpx-sse, Typer and Rich
(`tests/test_layers.py` holds it to that), so the client starts fast and speaks only the API.
"""
