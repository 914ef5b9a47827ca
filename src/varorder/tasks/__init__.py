"""End-to-end experiments that combine readers, models and algorithms (one module per task)."""
