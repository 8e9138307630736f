"""Plain helpers no app owns: bearer tokens, the API's base classes and pages, CSV that a
spreadsheet cannot run, the client's address, the public-address policy, the read-only
admin. Imports no app of the product (tests/test_layout.py)."""
