"""The history search index: FTS5 on SQLite, a tsvector side table with a GIN index on PostgreSQL.

Both are built from `Message.search_terms` and `Message.search_context` (conversations 0005) and kept in
sync by triggers, so every way of writing messages (save, bulk_create, COPY) is indexed. The SQL is
written out here as this migration installs it (the design of memory 0004 and 0009 included); 0003
upgrades a database that an earlier version of this migration built with the first PostgreSQL design.
"""

from django.db import migrations

SQLITE_INSTALL = [
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
    """INSERT INTO memory_message_fts(memory_message_fts) VALUES ('rebuild')""",
    """INSERT INTO memory_search_session(session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
        SELECT session_id, count(*), sum((length(search_terms) - length(replace(search_terms, ' ', '')) + (search_terms != ''))), sum((length(search_context) - length(replace(search_context, ' ', '')) + (search_context != ''))),
            min(id), max(id), sum(tokens)
        FROM conversations_message GROUP BY session_id""",
    """INSERT INTO memory_search_term(session_id, term, df)
        SELECT m.session_id, t.value, count(DISTINCT m.id) FROM conversations_message AS m,
        json_each('["' || replace(m.search_terms, ' ', '","') || '"]') AS t WHERE m.search_terms != '' GROUP BY m.session_id, t.value""",
]


SQLITE_UNINSTALL = [
    """DROP TRIGGER IF EXISTS memory_search_session_delete""",
    """DROP TRIGGER IF EXISTS memory_search_message_update""",
    """DROP TRIGGER IF EXISTS memory_search_message_delete""",
    """DROP TRIGGER IF EXISTS memory_search_message_insert""",
    """DROP TABLE IF EXISTS memory_message_fts""",
    """DROP VIEW IF EXISTS memory_message_fts_content""",
    """DROP TABLE IF EXISTS memory_search_term""",
    """DROP TABLE IF EXISTS memory_search_session""",
]


POSTGRES_INSTALL = [
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


POSTGRES_UNINSTALL = [
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
]


STATEMENTS = {
    "sqlite": (SQLITE_INSTALL, SQLITE_UNINSTALL),
    "postgresql": (POSTGRES_INSTALL, POSTGRES_UNINSTALL),
}


def install(apps, schema_editor):
    for statement in STATEMENTS.get(schema_editor.connection.vendor, ([], []))[0]:
        schema_editor.execute(statement, params=None)


def uninstall(apps, schema_editor):
    for statement in STATEMENTS.get(schema_editor.connection.vendor, ([], []))[1]:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0001_initial"),
        ("conversations", "0005_message_search_terms"),
    ]

    operations = [migrations.RunPython(install, uninstall)]
