"""Reporters: write the skill summaries of a run somewhere."""
