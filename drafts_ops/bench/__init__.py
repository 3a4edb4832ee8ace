"""Benchmarks that print figures side by side (``drafts bench dedisp``, ``drafts bench
search``)."""
