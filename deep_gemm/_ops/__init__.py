"""Dispatcher plumbing: the schema table, the library and the shared argument checks."""
