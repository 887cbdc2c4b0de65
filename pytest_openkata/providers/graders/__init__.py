"""Graders: turn an agent's result into criterion results."""
