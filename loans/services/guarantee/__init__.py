"""The floor, kept (DESIGN "The floor"): whether each contract's base quota was there when its
team asked for it, measured from the schedulers' own records (measure), the intervals
gpuloans itself held a contract (holds), and what a breach credits (the ledger's periods
carry it: loans.services.ledger.read)."""
