"""Readers and writers for the data formats varorder consumes and produces."""
