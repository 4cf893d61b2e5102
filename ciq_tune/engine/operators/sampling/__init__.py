"""Sampling operators (pymoo `Sampling` subclasses)."""
