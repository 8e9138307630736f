"""The rollup trigger PostgreSQL runs is the one in metering/sql/rollups.sql, letter for letter:
after every migration, the function the database holds (pg_get_functiondef) has the file's
body, so a reader of the file reads what runs."""

import pytest
from django.db import connection

from metering import sql


@pytest.mark.postgresql
@pytest.mark.django_db
def test_the_function_the_database_runs_is_the_file():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef(%s::regproc)", [sql.ROLLUPS_FUNCTION])
        [(definition,)] = cursor.fetchall()
    assert sql.body(definition) == sql.body(sql.rollups_sql())


@pytest.mark.postgresql
@pytest.mark.django_db
def test_the_comparison_sees_a_changed_function():
    """The check itself: a function changed by one space is told apart from the file."""
    changed = sql.rollups_sql().replace("RETURN NULL;\nEND", "RETURN  NULL;\nEND")
    assert changed != sql.rollups_sql()
    with connection.cursor() as cursor:
        cursor.execute(changed)
        cursor.execute("SELECT pg_get_functiondef(%s::regproc)", [sql.ROLLUPS_FUNCTION])
        [(definition,)] = cursor.fetchall()
    assert sql.body(definition) != sql.body(sql.rollups_sql())


def test_the_body_is_read_from_either_quote():
    assert sql.body("CREATE FUNCTION f() AS $$\nBEGIN\nEND\n$$;") == "BEGIN\nEND"
    assert sql.body("CREATE OR REPLACE FUNCTION public.f()\n RETURNS trigger\n LANGUAGE plpgsql\n"
                    "AS $function$\nBEGIN\nEND\n$function$\n") == "BEGIN\nEND"
