"""PostgreSQL: the term statistics record where each term's plain posting list ends (`plain_last`) and
its newest match (`last_id`), so that a bounded lookup of a common term skips its plain list when the
bound lies past it (see memory/search/postgres.py).

A database built before is rebuilt here: the triggers, side table and statistics are dropped and
refilled from the archive, and the GIN index is built again (REBUILD, the design as it was when this
migration was frozen). A database that 0002 or 0003 built with the current design is left alone, and
so is SQLite.
"""

from django.db import migrations

REBUILD = [
    """DROP TRIGGER IF EXISTS memory_search_message_truncate ON conversations_message""",
    """DROP TRIGGER IF EXISTS memory_search_session_delete ON conversations_session""",
    """DROP TRIGGER IF EXISTS memory_search_message_update ON conversations_message""",
    """DROP TRIGGER IF EXISTS memory_search_message_delete ON conversations_message""",
    """DROP TRIGGER IF EXISTS memory_search_message_insert ON conversations_message""",
    """DROP FUNCTION IF EXISTS memory_search_truncated()""",
    """DROP FUNCTION IF EXISTS memory_search_sessions_deleted()""",
    """DROP FUNCTION IF EXISTS memory_search_updated()""",
    """DROP FUNCTION IF EXISTS memory_search_deleted()""",
    """DROP FUNCTION IF EXISTS memory_search_inserted()""",
    """DROP TABLE IF EXISTS memory_search_term""",
    """DROP TABLE IF EXISTS memory_search_session""",
    """DROP TABLE IF EXISTS memory_message_search""",
    """DROP INDEX IF EXISTS memory_message_search_vector""",
    """ALTER TABLE conversations_message DROP COLUMN IF EXISTS search_vector""",
    """CREATE TABLE memory_message_search (id bigint NOT NULL PRIMARY KEY, vector tsvector NOT NULL)""",
    """CREATE TABLE memory_search_session (
        session_id bigint NOT NULL PRIMARY KEY, messages bigint NOT NULL,
        body_terms bigint NOT NULL, context_terms bigint NOT NULL,
        first_id bigint NOT NULL, last_id bigint NOT NULL, tokens bigint NOT NULL DEFAULT 0)""",
    """CREATE TABLE memory_search_term (
        session_id bigint NOT NULL, term text NOT NULL, df integer NOT NULL,
        plain_last bigint NOT NULL DEFAULT 0, last_id bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (session_id, term))""",
    """CREATE FUNCTION memory_search_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT session_id, count(*), sum(coalesce(array_length(string_to_array(nullif(search_terms, ''), ' '), 1), 0)), sum(coalesce(array_length(string_to_array(nullif(search_context, ''), ' '), 1), 0)), min(id), max(id),
                sum(tokens)
            FROM new_rows GROUP BY session_id ORDER BY session_id
            ON CONFLICT (session_id) DO UPDATE SET messages = s.messages + excluded.messages,
                tokens = s.tokens + excluded.tokens,
                body_terms = s.body_terms + excluded.body_terms,
                context_terms = s.context_terms + excluded.context_terms,
                first_id = least(s.first_id, excluded.first_id),
                last_id = greatest(s.last_id, excluded.last_id);
            
        INSERT INTO memory_search_term AS t (session_id, term, df, plain_last, last_id)
            SELECT r.session_id, u.term, count(*) FILTER (WHERE u.body), max(r.id), max(r.id)
            FROM new_rows AS r
            CROSS JOIN LATERAL (
                SELECT x.term, bool_or(x.body) AS body FROM (
                    SELECT term, true AS body FROM unnest(string_to_array(r.search_terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.search_context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df,
                plain_last = CASE WHEN t.df < 500 AND t.last_id <= t.plain_last
                    THEN greatest(t.plain_last, excluded.plain_last) ELSE t.plain_last END,
                last_id = greatest(t.last_id, excluded.last_id);
            
        INSERT INTO memory_message_search (id, vector)
            SELECT r.id, array_to_tsvector(array_agg(DISTINCT r.session_id::text || '_' || x.term
                || CASE WHEN r.id > t.plain_last THEN '_' || (r.id >> 12)::text ELSE '' END))
            FROM new_rows AS r
            CROSS JOIN LATERAL unnest(string_to_array(r.search_terms || ' ' || r.search_context, ' ')) AS x(term)
            JOIN memory_search_term AS t ON t.session_id = r.session_id AND t.term = x.term
            WHERE x.term <> ''
            GROUP BY r.id;
            RETURN NULL;
        END $$""",
    """CREATE FUNCTION memory_search_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            
        DELETE FROM memory_message_search WHERE id IN (SELECT id FROM old_rows);
            
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT session_id, -count(*), -sum(coalesce(array_length(string_to_array(nullif(search_terms, ''), ' '), 1), 0)), -sum(coalesce(array_length(string_to_array(nullif(search_context, ''), ' '), 1), 0)), min(id), max(id),
                -sum(tokens)
            FROM old_rows GROUP BY session_id ORDER BY session_id
            ON CONFLICT (session_id) DO UPDATE SET messages = s.messages + excluded.messages,
                tokens = s.tokens + excluded.tokens,
                body_terms = s.body_terms + excluded.body_terms,
                context_terms = s.context_terms + excluded.context_terms,
                first_id = least(s.first_id, excluded.first_id),
                last_id = greatest(s.last_id, excluded.last_id);
            
        INSERT INTO memory_search_term AS t (session_id, term, df)
            SELECT r.session_id, u.term, -count(*) FILTER (WHERE u.body)
            FROM old_rows AS r
            CROSS JOIN LATERAL (
                SELECT x.term, bool_or(x.body) AS body FROM (
                    SELECT term, true AS body FROM unnest(string_to_array(r.search_terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.search_context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df;
            RETURN NULL;
        END $$""",
    """CREATE FUNCTION memory_search_updated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            
        DELETE FROM memory_message_search WHERE id IN (SELECT id FROM old_rows);
            
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT session_id, -count(*), -sum(coalesce(array_length(string_to_array(nullif(search_terms, ''), ' '), 1), 0)), -sum(coalesce(array_length(string_to_array(nullif(search_context, ''), ' '), 1), 0)), min(id), max(id),
                -sum(tokens)
            FROM old_rows GROUP BY session_id ORDER BY session_id
            ON CONFLICT (session_id) DO UPDATE SET messages = s.messages + excluded.messages,
                tokens = s.tokens + excluded.tokens,
                body_terms = s.body_terms + excluded.body_terms,
                context_terms = s.context_terms + excluded.context_terms,
                first_id = least(s.first_id, excluded.first_id),
                last_id = greatest(s.last_id, excluded.last_id);
            
        INSERT INTO memory_search_term AS t (session_id, term, df)
            SELECT r.session_id, u.term, -count(*) FILTER (WHERE u.body)
            FROM old_rows AS r
            CROSS JOIN LATERAL (
                SELECT x.term, bool_or(x.body) AS body FROM (
                    SELECT term, true AS body FROM unnest(string_to_array(r.search_terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.search_context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df;
            
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT session_id, count(*), sum(coalesce(array_length(string_to_array(nullif(search_terms, ''), ' '), 1), 0)), sum(coalesce(array_length(string_to_array(nullif(search_context, ''), ' '), 1), 0)), min(id), max(id),
                sum(tokens)
            FROM new_rows GROUP BY session_id ORDER BY session_id
            ON CONFLICT (session_id) DO UPDATE SET messages = s.messages + excluded.messages,
                tokens = s.tokens + excluded.tokens,
                body_terms = s.body_terms + excluded.body_terms,
                context_terms = s.context_terms + excluded.context_terms,
                first_id = least(s.first_id, excluded.first_id),
                last_id = greatest(s.last_id, excluded.last_id);
            
        INSERT INTO memory_search_term AS t (session_id, term, df, plain_last, last_id)
            SELECT r.session_id, u.term, count(*) FILTER (WHERE u.body), max(r.id), max(r.id)
            FROM new_rows AS r
            CROSS JOIN LATERAL (
                SELECT x.term, bool_or(x.body) AS body FROM (
                    SELECT term, true AS body FROM unnest(string_to_array(r.search_terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.search_context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df,
                plain_last = CASE WHEN t.df < 500 AND t.last_id <= t.plain_last
                    THEN greatest(t.plain_last, excluded.plain_last) ELSE t.plain_last END,
                last_id = greatest(t.last_id, excluded.last_id);
            
        INSERT INTO memory_message_search (id, vector)
            SELECT r.id, array_to_tsvector(array_agg(DISTINCT r.session_id::text || '_' || x.term
                || CASE WHEN r.id > t.plain_last THEN '_' || (r.id >> 12)::text ELSE '' END))
            FROM new_rows AS r
            CROSS JOIN LATERAL unnest(string_to_array(r.search_terms || ' ' || r.search_context, ' ')) AS x(term)
            JOIN memory_search_term AS t ON t.session_id = r.session_id AND t.term = x.term
            WHERE x.term <> ''
            GROUP BY r.id;
            RETURN NULL;
        END $$""",
    """CREATE FUNCTION memory_search_sessions_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM memory_search_session WHERE session_id IN (SELECT id FROM old_rows);
            DELETE FROM memory_search_term WHERE session_id IN (SELECT id FROM old_rows);
            RETURN NULL;
        END $$""",
    """CREATE FUNCTION memory_search_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN TRUNCATE memory_message_search, memory_search_session, memory_search_term; RETURN NULL; END $$""",
    """CREATE TRIGGER memory_search_message_insert AFTER INSERT ON conversations_message
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_search_inserted()""",
    """CREATE TRIGGER memory_search_message_delete AFTER DELETE ON conversations_message
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_search_deleted()""",
    """CREATE TRIGGER memory_search_message_update AFTER UPDATE ON conversations_message
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_updated()""",
    """CREATE TRIGGER memory_search_session_delete AFTER DELETE ON conversations_session
        REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_sessions_deleted()""",
    """CREATE TRIGGER memory_search_message_truncate AFTER TRUNCATE ON conversations_message
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_truncated()""",
    """SET LOCAL maintenance_work_mem = '256MB'""",
    """
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT session_id, count(*), sum(coalesce(array_length(string_to_array(nullif(search_terms, ''), ' '), 1), 0)), sum(coalesce(array_length(string_to_array(nullif(search_context, ''), ' '), 1), 0)), min(id), max(id),
                sum(tokens)
            FROM conversations_message GROUP BY session_id ORDER BY session_id
            ON CONFLICT (session_id) DO UPDATE SET messages = s.messages + excluded.messages,
                tokens = s.tokens + excluded.tokens,
                body_terms = s.body_terms + excluded.body_terms,
                context_terms = s.context_terms + excluded.context_terms,
                first_id = least(s.first_id, excluded.first_id),
                last_id = greatest(s.last_id, excluded.last_id);""",
    """INSERT INTO memory_search_term (session_id, term, df, plain_last, last_id)
        SELECT session_id, term, df, CASE WHEN df >= 500 THEN 0 ELSE last_id END, last_id FROM (
            SELECT r.session_id, u.term, count(*) FILTER (WHERE u.body) AS df, max(r.id) AS last_id
            FROM conversations_message AS r
            CROSS JOIN LATERAL (
                SELECT x.term, bool_or(x.body) AS body FROM (
                    SELECT term, true AS body FROM unnest(string_to_array(r.search_terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.search_context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u
            GROUP BY 1, 2
        ) AS terms""",
    """
        INSERT INTO memory_message_search (id, vector)
            SELECT r.id, array_to_tsvector(array_agg(DISTINCT r.session_id::text || '_' || x.term
                || CASE WHEN r.id > t.plain_last THEN '_' || (r.id >> 12)::text ELSE '' END))
            FROM conversations_message AS r
            CROSS JOIN LATERAL unnest(string_to_array(r.search_terms || ' ' || r.search_context, ' ')) AS x(term)
            JOIN memory_search_term AS t ON t.session_id = r.session_id AND t.term = x.term
            WHERE x.term <> ''
            GROUP BY r.id;""",
    """CREATE INDEX memory_message_search_vector ON memory_message_search USING gin (vector) WITH (fastupdate = off)""",
]


def upgrade(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        # Whether the term statistics record where each term's plain list ends already.
        cursor.execute(
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_name = 'memory_search_term' AND column_name = 'plain_last'"
        )
        if cursor.fetchone() is not None:
            return
        for statement in REBUILD:  # locks the message table while it runs
            cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_search_side_table")]

    # Going back leaves the new columns: every earlier migration installs the current design too.
    operations = [migrations.RunPython(upgrade, migrations.RunPython.noop)]
