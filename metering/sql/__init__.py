"""SQL PostgreSQL runs for metering, each piece whole in one readable file: rollups.sql, the
trigger's function that keeps the hourly rollups as samples are inserted. Migrations load it
(a change edits the file and adds a migration that calls load_rollups); SQLite keeps the same
arithmetic in Python (metering.rollups)."""

from pathlib import Path

HERE = Path(__file__).resolve().parent
ROLLUPS_FUNCTION = "metering_add_rollups"


def rollups_sql() -> str:
    return (HERE / "rollups.sql").read_text()


def body(definition: str) -> str:
    """What lies between a function definition's dollar quotes ($$ or $function$, as
    pg_get_functiondef writes it back)."""
    start = definition.index("AS $")
    quote = definition[start + 3:definition.index("$", start + 4) + 1]
    inside = definition.index(quote, start) + len(quote)
    return definition[inside:definition.rindex(quote)].strip("\n")


def load_rollups(apps, schema_editor) -> None:
    """Migrations' step: (re)create the trigger's function from rollups.sql."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(rollups_sql())
