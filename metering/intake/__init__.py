"""Agent protocol v1 on the server: the endpoint (api.py, answered ahead of the pages'
middleware), the msgspec fast path (wire.py) and the per-sample checks (protocol.py),
devices and refusals (ingest.py), and the writers (store.py, store_postgresql.py with COPY,
store_sqlite.py). The hot path of the product; nothing else writes samples."""
