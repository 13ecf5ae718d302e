"""Webhook endpoints, their secrets and URLs, and the delivery outbox."""
