"""Adapters for the GPU clouds, behind one small interface (see `base.py`)."""
