"""The owner of each chat's term rows: memory_search_term gains `user_id` (the chat's user), filled
for every existing row, with an index on (user, term, df descending), so that search across a user's
chats reads a term's chats in one index range instead of probing every chat. A trigger gives a new
term row its chat's user, another moves a chat's rows when the chat changes hands. The SQL is written
out as it was when this migration was frozen; going back drops the column, its index and triggers."""

from django.db import migrations

SQLITE_FORWARDS = [
    "ALTER TABLE memory_search_term ADD COLUMN user_id integer",
    """UPDATE memory_search_term
        SET user_id = (SELECT user_id FROM conversations_session WHERE id = memory_search_term.session_id)""",
    """CREATE INDEX IF NOT EXISTS memory_search_term_user ON memory_search_term (user_id, term, df DESC)""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_term_owner AFTER INSERT ON memory_search_term
        WHEN new.user_id IS NULL
        BEGIN
            UPDATE memory_search_term
                SET user_id = (SELECT user_id FROM conversations_session WHERE id = new.session_id)
                WHERE session_id = new.session_id AND term = new.term;
        END""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_session_owner AFTER UPDATE OF user_id ON conversations_session
        WHEN old.user_id IS NOT new.user_id
        BEGIN
            UPDATE memory_search_term SET user_id = new.user_id WHERE session_id = new.id;
        END""",
    "ANALYZE memory_search_term",
]

SQLITE_BACKWARDS = [
    "DROP TRIGGER IF EXISTS memory_search_session_owner",
    "DROP TRIGGER IF EXISTS memory_search_term_owner",
    "DROP INDEX IF EXISTS memory_search_term_user",
    "ALTER TABLE memory_search_term DROP COLUMN user_id",
]

POSTGRES_FORWARDS = [
    "ALTER TABLE memory_search_term ADD COLUMN user_id bigint",
    """UPDATE memory_search_term AS t SET user_id = s.user_id
        FROM conversations_session AS s WHERE s.id = t.session_id""",
    """CREATE INDEX IF NOT EXISTS memory_search_term_user ON memory_search_term (user_id, term, df DESC)
        INCLUDE (session_id)""",
    """CREATE OR REPLACE FUNCTION memory_search_term_owner() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE memory_search_term
                SET user_id = (SELECT user_id FROM conversations_session WHERE id = NEW.session_id)
                WHERE session_id = NEW.session_id AND term = NEW.term;
            RETURN NULL;
        END $$""",
    """CREATE OR REPLACE TRIGGER memory_search_term_owner AFTER INSERT ON memory_search_term
        FOR EACH ROW WHEN (NEW.user_id IS NULL) EXECUTE FUNCTION memory_search_term_owner()""",
    """CREATE OR REPLACE FUNCTION memory_search_session_owner() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE memory_search_term SET user_id = NEW.user_id WHERE session_id = NEW.id;
            RETURN NULL;
        END $$""",
    """CREATE OR REPLACE TRIGGER memory_search_session_owner AFTER UPDATE OF user_id ON conversations_session
        FOR EACH ROW WHEN (OLD.user_id IS DISTINCT FROM NEW.user_id) EXECUTE FUNCTION memory_search_session_owner()""",
    "ANALYZE memory_search_term",
]

POSTGRES_BACKWARDS = [
    "DROP TRIGGER IF EXISTS memory_search_session_owner ON conversations_session",
    "DROP FUNCTION IF EXISTS memory_search_session_owner()",
    "DROP TRIGGER IF EXISTS memory_search_term_owner ON memory_search_term",
    "DROP FUNCTION IF EXISTS memory_search_term_owner()",
    "DROP INDEX IF EXISTS memory_search_term_user",
    "ALTER TABLE memory_search_term DROP COLUMN user_id",
]


def _run(statements):
    def run(apps, schema_editor):
        with schema_editor.connection.cursor() as cursor:
            for statement in statements.get(schema_editor.connection.vendor, []):
                cursor.execute(statement)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0016_search_documents"),
    ]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARDS, "postgresql": POSTGRES_FORWARDS}),
            _run({"sqlite": SQLITE_BACKWARDS, "postgresql": POSTGRES_BACKWARDS}),
        ),
    ]
