"""Graphical models over strings (see varorder.strings.inference)."""
