"""The database: engine and sessions, column types, ORM models, the one-hop writer."""
