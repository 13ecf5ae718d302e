"""Webhooks: signing secrets, the SSRF guard, the signed sender and the outbox dispatcher."""
