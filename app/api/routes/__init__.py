"""The API's routes, one module per resource: each parses, calls one service and presents
what it returns (the plumbing they share is in `app/api/`)."""
