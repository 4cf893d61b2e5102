"""Repair operators (pymoo `Repair` subclasses)."""
