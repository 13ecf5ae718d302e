"""The open models: the catalogue the service knows (`catalogue`, shipped as TOML beside it),
the rule that says which machines hold one, and the start-up script that serves one
(`serving`). Pure: it imports only `core`; which shapes of which providers hold a model, as an
order's alternatives, is `services/model_fit.py`."""
