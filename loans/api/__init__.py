"""The REST API: DRF views and serializers for integrations, leads and operators. Like the
pages, it asks loans.access and reads and writes through loans.services."""
