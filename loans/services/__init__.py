"""Writes and reads that span rows: the ledger, closing, amendments; called by pages, the API,
the jobs and the admin. Services never import views, the API or tasks."""
