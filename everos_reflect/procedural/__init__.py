"""Procedural memory (seed 002): task records the application writes, and the lessons the
``learn_lessons`` strategy derives from them per task type."""
