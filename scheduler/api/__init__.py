"""The only layer that writes to the API server: Binding, status patches, Events, evictions.

Everything above talks to the small ApiClient protocol; tests use the in-memory fake.
"""
