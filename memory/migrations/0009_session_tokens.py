"""The sessions' search statistics also keep the sum of their messages' token estimates, so that
`GET /memory/stats` reads a chat's totals instead of counting its archive (agent.stats): the column,
its value for what is archived, and the triggers (SQLite) or trigger functions (PostgreSQL) that keep
it, as they were when this migration was frozen."""

from django.db import migrations

SQLITE_TRIGGERS = [
    """CREATE VIEW IF NOT EXISTS memory_message_fts_content AS
        SELECT m.id AS id, CASE WHEN trim(m.search_terms || ' ' || m.search_context) = '' THEN '' ELSE m.session_id || '_' || replace(trim(m.search_terms || ' ' || m.search_context), ' ', ' ' || m.session_id || '_') END AS terms FROM conversations_message AS m""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS memory_message_fts USING fts5(
        terms, content='memory_message_fts_content', content_rowid='id', detail='none',
        tokenize="ascii tokenchars '_'")""",
    """CREATE TABLE IF NOT EXISTS memory_search_session (
        session_id integer NOT NULL PRIMARY KEY, messages integer NOT NULL,
        body_terms integer NOT NULL, context_terms integer NOT NULL,
        first_id integer NOT NULL, last_id integer NOT NULL, tokens integer NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS memory_search_term (
        session_id integer NOT NULL, term text NOT NULL, df integer NOT NULL,
        PRIMARY KEY (session_id, term)) WITHOUT ROWID""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_message_insert AFTER INSERT ON conversations_message
        BEGIN 
    INSERT INTO memory_message_fts(rowid, terms)
        SELECT new.id, CASE WHEN trim(new.search_terms || ' ' || new.search_context) = '' THEN '' ELSE new.session_id || '_' || replace(trim(new.search_terms || ' ' || new.search_context), ' ', ' ' || new.session_id || '_') END WHERE CASE WHEN trim(new.search_terms || ' ' || new.search_context) = '' THEN '' ELSE new.session_id || '_' || replace(trim(new.search_terms || ' ' || new.search_context), ' ', ' ' || new.session_id || '_') END != '';
    INSERT INTO memory_search_session(session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
        VALUES (new.session_id, 1, (length(new.search_terms) - length(replace(new.search_terms, ' ', '')) + (new.search_terms != '')), (length(new.search_context) - length(replace(new.search_context, ' ', '')) + (new.search_context != '')),
                new.id, new.id, new.tokens)
        ON CONFLICT(session_id) DO UPDATE SET messages = messages + 1, tokens = tokens + excluded.tokens,
            first_id = min(first_id, excluded.first_id), last_id = max(last_id, excluded.last_id),
            body_terms = body_terms + excluded.body_terms,
            context_terms = context_terms + excluded.context_terms;
    INSERT INTO memory_search_term(session_id, term, df)
        SELECT DISTINCT new.session_id, value, 1 FROM json_each('["' || replace(new.search_terms, ' ', '","') || '"]')
        WHERE new.search_terms != ''
        ON CONFLICT(session_id, term) DO UPDATE SET df = df + 1; END""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_message_delete AFTER DELETE ON conversations_message
        BEGIN 
    INSERT INTO memory_message_fts(memory_message_fts, rowid, terms)
        SELECT 'delete', old.id, CASE WHEN trim(old.search_terms || ' ' || old.search_context) = '' THEN '' ELSE old.session_id || '_' || replace(trim(old.search_terms || ' ' || old.search_context), ' ', ' ' || old.session_id || '_') END WHERE CASE WHEN trim(old.search_terms || ' ' || old.search_context) = '' THEN '' ELSE old.session_id || '_' || replace(trim(old.search_terms || ' ' || old.search_context), ' ', ' ' || old.session_id || '_') END != '';
    UPDATE memory_search_session SET messages = messages - 1, tokens = tokens - old.tokens,
        body_terms = body_terms - (length(old.search_terms) - length(replace(old.search_terms, ' ', '')) + (old.search_terms != '')),
        context_terms = context_terms - (length(old.search_context) - length(replace(old.search_context, ' ', '')) + (old.search_context != ''))
        WHERE session_id = old.session_id;
    UPDATE memory_search_term SET df = df - 1 WHERE session_id = old.session_id
        AND term IN (SELECT value FROM json_each('["' || replace(old.search_terms, ' ', '","') || '"]')); END""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_message_update
        AFTER UPDATE OF session_id, search_terms, search_context ON conversations_message
        BEGIN 
    INSERT INTO memory_message_fts(memory_message_fts, rowid, terms)
        SELECT 'delete', old.id, CASE WHEN trim(old.search_terms || ' ' || old.search_context) = '' THEN '' ELSE old.session_id || '_' || replace(trim(old.search_terms || ' ' || old.search_context), ' ', ' ' || old.session_id || '_') END WHERE CASE WHEN trim(old.search_terms || ' ' || old.search_context) = '' THEN '' ELSE old.session_id || '_' || replace(trim(old.search_terms || ' ' || old.search_context), ' ', ' ' || old.session_id || '_') END != '';
    UPDATE memory_search_session SET messages = messages - 1, tokens = tokens - old.tokens,
        body_terms = body_terms - (length(old.search_terms) - length(replace(old.search_terms, ' ', '')) + (old.search_terms != '')),
        context_terms = context_terms - (length(old.search_context) - length(replace(old.search_context, ' ', '')) + (old.search_context != ''))
        WHERE session_id = old.session_id;
    UPDATE memory_search_term SET df = df - 1 WHERE session_id = old.session_id
        AND term IN (SELECT value FROM json_each('["' || replace(old.search_terms, ' ', '","') || '"]')); 
    INSERT INTO memory_message_fts(rowid, terms)
        SELECT new.id, CASE WHEN trim(new.search_terms || ' ' || new.search_context) = '' THEN '' ELSE new.session_id || '_' || replace(trim(new.search_terms || ' ' || new.search_context), ' ', ' ' || new.session_id || '_') END WHERE CASE WHEN trim(new.search_terms || ' ' || new.search_context) = '' THEN '' ELSE new.session_id || '_' || replace(trim(new.search_terms || ' ' || new.search_context), ' ', ' ' || new.session_id || '_') END != '';
    INSERT INTO memory_search_session(session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
        VALUES (new.session_id, 1, (length(new.search_terms) - length(replace(new.search_terms, ' ', '')) + (new.search_terms != '')), (length(new.search_context) - length(replace(new.search_context, ' ', '')) + (new.search_context != '')),
                new.id, new.id, new.tokens)
        ON CONFLICT(session_id) DO UPDATE SET messages = messages + 1, tokens = tokens + excluded.tokens,
            first_id = min(first_id, excluded.first_id), last_id = max(last_id, excluded.last_id),
            body_terms = body_terms + excluded.body_terms,
            context_terms = context_terms + excluded.context_terms;
    INSERT INTO memory_search_term(session_id, term, df)
        SELECT DISTINCT new.session_id, value, 1 FROM json_each('["' || replace(new.search_terms, ' ', '","') || '"]')
        WHERE new.search_terms != ''
        ON CONFLICT(session_id, term) DO UPDATE SET df = df + 1; END""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_session_delete AFTER DELETE ON conversations_session
        BEGIN
            DELETE FROM memory_search_session WHERE session_id = old.id;
            DELETE FROM memory_search_term WHERE session_id = old.id;
        END""",
]


POSTGRES_FUNCTIONS = [
    """CREATE OR REPLACE FUNCTION memory_search_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
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
    """CREATE OR REPLACE FUNCTION memory_search_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
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
    """CREATE OR REPLACE FUNCTION memory_search_updated() RETURNS trigger LANGUAGE plpgsql AS $$
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
    """CREATE OR REPLACE FUNCTION memory_search_sessions_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM memory_search_session WHERE session_id IN (SELECT id FROM old_rows);
            DELETE FROM memory_search_term WHERE session_id IN (SELECT id FROM old_rows);
            RETURN NULL;
        END $$""",
    """CREATE OR REPLACE FUNCTION memory_search_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN TRUNCATE memory_message_search, memory_search_session, memory_search_term; RETURN NULL; END $$""",
]


def _sqlite(cursor):
    cursor.execute("SELECT 1 FROM pragma_table_info('memory_search_session') WHERE name = 'tokens'")
    if cursor.fetchone() is None:
        cursor.execute("ALTER TABLE memory_search_session ADD COLUMN tokens integer NOT NULL DEFAULT 0")
    cursor.execute(
        "UPDATE memory_search_session SET tokens = coalesce("
        "(SELECT sum(tokens) FROM conversations_message AS m WHERE m.session_id = memory_search_session.session_id), 0)"
    )
    for name in ("memory_search_message_insert", "memory_search_message_delete", "memory_search_message_update"):
        cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
    for statement in SQLITE_TRIGGERS:
        cursor.execute(statement)


def _postgres(cursor):
    cursor.execute("ALTER TABLE memory_search_session ADD COLUMN IF NOT EXISTS tokens bigint NOT NULL DEFAULT 0")
    cursor.execute(
        "UPDATE memory_search_session AS s SET tokens = coalesce("
        "(SELECT sum(tokens) FROM conversations_message WHERE session_id = s.session_id), 0)"
    )
    for statement in POSTGRES_FUNCTIONS:
        cursor.execute(statement)


def upgrade(apps, schema_editor):
    add = _postgres if schema_editor.connection.vendor == "postgresql" else _sqlite
    with schema_editor.connection.cursor() as cursor:
        add(cursor)


class Migration(migrations.Migration):
    dependencies = [("memory", "0008_vector_index")]

    # Going back leaves the column: the triggers of every earlier migration's design keep it too.
    operations = [migrations.RunPython(upgrade, migrations.RunPython.noop)]
