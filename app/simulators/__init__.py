"""Faithful local copies of the providers' HTTP APIs, plus a control API to drive them."""
