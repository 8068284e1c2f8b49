"""Search documents: a message's readable text, index terms and context move from three columns of
conversations_message (dropped by conversations 0017) to memory_searchdocument, one row per message,
with every row copied (and the message's token estimate, which the index's statistics sum). The
index's triggers move with them: they now fire on the documents. The statistics and the index itself are unchanged (the
same terms, the same ids), so nothing is rebuilt. The SQL is written out as it was when this migration
was frozen; going back copies the documents into the message columns and puts back the triggers of
memory 0009's design."""

import django.db.models.deletion
from django.db import migrations, models

COPY = (
    "INSERT INTO memory_searchdocument (message_id, session_id, text, terms, context, tokens)"
    " SELECT id, session_id, search_text, search_terms, search_context, tokens FROM conversations_message"
)
COPY_BACK = (
    "UPDATE conversations_message SET search_text = d.text, search_terms = d.terms, search_context = d.context"
    " FROM memory_searchdocument AS d WHERE d.message_id = conversations_message.id"
)

SQLITE_FORWARDS = [
    """DROP TRIGGER IF EXISTS memory_search_message_insert""",
    """DROP TRIGGER IF EXISTS memory_search_message_delete""",
    """DROP TRIGGER IF EXISTS memory_search_message_update""",
    """DROP VIEW IF EXISTS memory_message_fts_content""",
    COPY,
    """CREATE VIEW IF NOT EXISTS memory_message_fts_content AS
        SELECT d.message_id AS id, CASE WHEN trim(d.terms || ' ' || d.context) = '' THEN '' ELSE d.session_id || '_' || replace(trim(d.terms || ' ' || d.context), ' ', ' ' || d.session_id || '_') END AS terms FROM memory_searchdocument AS d""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_document_insert AFTER INSERT ON memory_searchdocument
        BEGIN 
    INSERT INTO memory_message_fts(rowid, terms)
        SELECT new.message_id, CASE WHEN trim(new.terms || ' ' || new.context) = '' THEN '' ELSE new.session_id || '_' || replace(trim(new.terms || ' ' || new.context), ' ', ' ' || new.session_id || '_') END WHERE CASE WHEN trim(new.terms || ' ' || new.context) = '' THEN '' ELSE new.session_id || '_' || replace(trim(new.terms || ' ' || new.context), ' ', ' ' || new.session_id || '_') END != '';
    INSERT INTO memory_search_session(session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
        VALUES (new.session_id, 1, (length(new.terms) - length(replace(new.terms, ' ', '')) + (new.terms != '')), (length(new.context) - length(replace(new.context, ' ', '')) + (new.context != '')),
                new.message_id, new.message_id, new.tokens)
        ON CONFLICT(session_id) DO UPDATE SET messages = messages + 1, tokens = tokens + excluded.tokens,
            first_id = min(first_id, excluded.first_id), last_id = max(last_id, excluded.last_id),
            body_terms = body_terms + excluded.body_terms,
            context_terms = context_terms + excluded.context_terms;
    INSERT INTO memory_search_term(session_id, term, df)
        SELECT DISTINCT new.session_id, value, 1 FROM json_each('["' || replace(new.terms, ' ', '","') || '"]')
        WHERE new.terms != ''
        ON CONFLICT(session_id, term) DO UPDATE SET df = df + 1; END""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_document_delete AFTER DELETE ON memory_searchdocument
        BEGIN 
    INSERT INTO memory_message_fts(memory_message_fts, rowid, terms)
        SELECT 'delete', old.message_id, CASE WHEN trim(old.terms || ' ' || old.context) = '' THEN '' ELSE old.session_id || '_' || replace(trim(old.terms || ' ' || old.context), ' ', ' ' || old.session_id || '_') END WHERE CASE WHEN trim(old.terms || ' ' || old.context) = '' THEN '' ELSE old.session_id || '_' || replace(trim(old.terms || ' ' || old.context), ' ', ' ' || old.session_id || '_') END != '';
    UPDATE memory_search_session SET messages = messages - 1, tokens = tokens - old.tokens,
        body_terms = body_terms - (length(old.terms) - length(replace(old.terms, ' ', '')) + (old.terms != '')),
        context_terms = context_terms - (length(old.context) - length(replace(old.context, ' ', '')) + (old.context != ''))
        WHERE session_id = old.session_id;
    UPDATE memory_search_term SET df = df - 1 WHERE session_id = old.session_id
        AND term IN (SELECT value FROM json_each('["' || replace(old.terms, ' ', '","') || '"]')); END""",
    """CREATE TRIGGER IF NOT EXISTS memory_search_document_update
        AFTER UPDATE OF session_id, terms, context ON memory_searchdocument
        BEGIN 
    INSERT INTO memory_message_fts(memory_message_fts, rowid, terms)
        SELECT 'delete', old.message_id, CASE WHEN trim(old.terms || ' ' || old.context) = '' THEN '' ELSE old.session_id || '_' || replace(trim(old.terms || ' ' || old.context), ' ', ' ' || old.session_id || '_') END WHERE CASE WHEN trim(old.terms || ' ' || old.context) = '' THEN '' ELSE old.session_id || '_' || replace(trim(old.terms || ' ' || old.context), ' ', ' ' || old.session_id || '_') END != '';
    UPDATE memory_search_session SET messages = messages - 1, tokens = tokens - old.tokens,
        body_terms = body_terms - (length(old.terms) - length(replace(old.terms, ' ', '')) + (old.terms != '')),
        context_terms = context_terms - (length(old.context) - length(replace(old.context, ' ', '')) + (old.context != ''))
        WHERE session_id = old.session_id;
    UPDATE memory_search_term SET df = df - 1 WHERE session_id = old.session_id
        AND term IN (SELECT value FROM json_each('["' || replace(old.terms, ' ', '","') || '"]')); 
    INSERT INTO memory_message_fts(rowid, terms)
        SELECT new.message_id, CASE WHEN trim(new.terms || ' ' || new.context) = '' THEN '' ELSE new.session_id || '_' || replace(trim(new.terms || ' ' || new.context), ' ', ' ' || new.session_id || '_') END WHERE CASE WHEN trim(new.terms || ' ' || new.context) = '' THEN '' ELSE new.session_id || '_' || replace(trim(new.terms || ' ' || new.context), ' ', ' ' || new.session_id || '_') END != '';
    INSERT INTO memory_search_session(session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
        VALUES (new.session_id, 1, (length(new.terms) - length(replace(new.terms, ' ', '')) + (new.terms != '')), (length(new.context) - length(replace(new.context, ' ', '')) + (new.context != '')),
                new.message_id, new.message_id, new.tokens)
        ON CONFLICT(session_id) DO UPDATE SET messages = messages + 1, tokens = tokens + excluded.tokens,
            first_id = min(first_id, excluded.first_id), last_id = max(last_id, excluded.last_id),
            body_terms = body_terms + excluded.body_terms,
            context_terms = context_terms + excluded.context_terms;
    INSERT INTO memory_search_term(session_id, term, df)
        SELECT DISTINCT new.session_id, value, 1 FROM json_each('["' || replace(new.terms, ' ', '","') || '"]')
        WHERE new.terms != ''
        ON CONFLICT(session_id, term) DO UPDATE SET df = df + 1; END""",
]


SQLITE_BACKWARDS = [
    """DROP TRIGGER IF EXISTS memory_search_document_insert""",
    """DROP TRIGGER IF EXISTS memory_search_document_delete""",
    """DROP TRIGGER IF EXISTS memory_search_document_update""",
    """DROP VIEW IF EXISTS memory_message_fts_content""",
    COPY_BACK,
    """CREATE VIEW IF NOT EXISTS memory_message_fts_content AS
        SELECT m.id AS id, CASE WHEN trim(m.search_terms || ' ' || m.search_context) = '' THEN '' ELSE m.session_id || '_' || replace(trim(m.search_terms || ' ' || m.search_context), ' ', ' ' || m.session_id || '_') END AS terms FROM conversations_message AS m""",
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
]


POSTGRES_FORWARDS = [
    """DROP TRIGGER IF EXISTS memory_search_message_truncate ON conversations_message""",
    """DROP TRIGGER IF EXISTS memory_search_message_update ON conversations_message""",
    """DROP TRIGGER IF EXISTS memory_search_message_delete ON conversations_message""",
    """DROP TRIGGER IF EXISTS memory_search_message_insert ON conversations_message""",
    COPY,
    """CREATE OR REPLACE FUNCTION memory_search_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT r.session_id, count(*), sum(coalesce(array_length(string_to_array(nullif(r.terms, ''), ' '), 1), 0)), sum(coalesce(array_length(string_to_array(nullif(r.context, ''), ' '), 1), 0)),
                min(r.message_id), max(r.message_id), sum(r.tokens)
            FROM new_rows AS r GROUP BY r.session_id ORDER BY r.session_id
            ON CONFLICT (session_id) DO UPDATE SET messages = s.messages + excluded.messages,
                tokens = s.tokens + excluded.tokens,
                body_terms = s.body_terms + excluded.body_terms,
                context_terms = s.context_terms + excluded.context_terms,
                first_id = least(s.first_id, excluded.first_id),
                last_id = greatest(s.last_id, excluded.last_id);
            
        INSERT INTO memory_search_term AS t (session_id, term, df, plain_last, last_id)
            SELECT r.session_id, u.term, count(*) FILTER (WHERE u.body), max(r.message_id), max(r.message_id)
            FROM new_rows AS r
            CROSS JOIN LATERAL (
                SELECT x.term, bool_or(x.body) AS body FROM (
                    SELECT term, true AS body FROM unnest(string_to_array(r.terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df,
                plain_last = CASE WHEN t.df < 500 AND t.last_id <= t.plain_last
                    THEN greatest(t.plain_last, excluded.plain_last) ELSE t.plain_last END,
                last_id = greatest(t.last_id, excluded.last_id);
            
        INSERT INTO memory_message_search (id, vector)
            SELECT r.message_id, array_to_tsvector(array_agg(DISTINCT r.session_id::text || '_' || x.term
                || CASE WHEN r.message_id > t.plain_last THEN '_' || (r.message_id >> 12)::text ELSE '' END))
            FROM new_rows AS r
            CROSS JOIN LATERAL unnest(string_to_array(r.terms || ' ' || r.context, ' ')) AS x(term)
            JOIN memory_search_term AS t ON t.session_id = r.session_id AND t.term = x.term
            WHERE x.term <> ''
            GROUP BY r.message_id;
            RETURN NULL;
        END $$""",
    """CREATE OR REPLACE FUNCTION memory_search_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            
        DELETE FROM memory_message_search WHERE id IN (SELECT message_id FROM old_rows);
            
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT r.session_id, -count(*), -sum(coalesce(array_length(string_to_array(nullif(r.terms, ''), ' '), 1), 0)), -sum(coalesce(array_length(string_to_array(nullif(r.context, ''), ' '), 1), 0)),
                min(r.message_id), max(r.message_id), -sum(r.tokens)
            FROM old_rows AS r GROUP BY r.session_id ORDER BY r.session_id
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
                    SELECT term, true AS body FROM unnest(string_to_array(r.terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df;
            RETURN NULL;
        END $$""",
    """CREATE OR REPLACE FUNCTION memory_search_updated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            
        DELETE FROM memory_message_search WHERE id IN (SELECT message_id FROM old_rows);
            
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT r.session_id, -count(*), -sum(coalesce(array_length(string_to_array(nullif(r.terms, ''), ' '), 1), 0)), -sum(coalesce(array_length(string_to_array(nullif(r.context, ''), ' '), 1), 0)),
                min(r.message_id), max(r.message_id), -sum(r.tokens)
            FROM old_rows AS r GROUP BY r.session_id ORDER BY r.session_id
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
                    SELECT term, true AS body FROM unnest(string_to_array(r.terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df;
            
        INSERT INTO memory_search_session AS s
            (session_id, messages, body_terms, context_terms, first_id, last_id, tokens)
            SELECT r.session_id, count(*), sum(coalesce(array_length(string_to_array(nullif(r.terms, ''), ' '), 1), 0)), sum(coalesce(array_length(string_to_array(nullif(r.context, ''), ' '), 1), 0)),
                min(r.message_id), max(r.message_id), sum(r.tokens)
            FROM new_rows AS r GROUP BY r.session_id ORDER BY r.session_id
            ON CONFLICT (session_id) DO UPDATE SET messages = s.messages + excluded.messages,
                tokens = s.tokens + excluded.tokens,
                body_terms = s.body_terms + excluded.body_terms,
                context_terms = s.context_terms + excluded.context_terms,
                first_id = least(s.first_id, excluded.first_id),
                last_id = greatest(s.last_id, excluded.last_id);
            
        INSERT INTO memory_search_term AS t (session_id, term, df, plain_last, last_id)
            SELECT r.session_id, u.term, count(*) FILTER (WHERE u.body), max(r.message_id), max(r.message_id)
            FROM new_rows AS r
            CROSS JOIN LATERAL (
                SELECT x.term, bool_or(x.body) AS body FROM (
                    SELECT term, true AS body FROM unnest(string_to_array(r.terms, ' ')) AS term
                    UNION ALL
                    SELECT term, false FROM unnest(string_to_array(r.context, ' ')) AS term
                ) AS x WHERE x.term <> '' GROUP BY x.term
            ) AS u
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (session_id, term) DO UPDATE SET df = t.df + excluded.df,
                plain_last = CASE WHEN t.df < 500 AND t.last_id <= t.plain_last
                    THEN greatest(t.plain_last, excluded.plain_last) ELSE t.plain_last END,
                last_id = greatest(t.last_id, excluded.last_id);
            
        INSERT INTO memory_message_search (id, vector)
            SELECT r.message_id, array_to_tsvector(array_agg(DISTINCT r.session_id::text || '_' || x.term
                || CASE WHEN r.message_id > t.plain_last THEN '_' || (r.message_id >> 12)::text ELSE '' END))
            FROM new_rows AS r
            CROSS JOIN LATERAL unnest(string_to_array(r.terms || ' ' || r.context, ' ')) AS x(term)
            JOIN memory_search_term AS t ON t.session_id = r.session_id AND t.term = x.term
            WHERE x.term <> ''
            GROUP BY r.message_id;
            RETURN NULL;
        END $$""",
    """CREATE TRIGGER memory_search_document_insert AFTER INSERT ON memory_searchdocument
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_search_inserted()""",
    """CREATE TRIGGER memory_search_document_delete AFTER DELETE ON memory_searchdocument
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_search_deleted()""",
    """CREATE TRIGGER memory_search_document_update AFTER UPDATE ON memory_searchdocument
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_updated()""",
    """CREATE TRIGGER memory_search_document_truncate AFTER TRUNCATE ON memory_searchdocument
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_truncated()""",
]


POSTGRES_BACKWARDS = [
    """DROP TRIGGER IF EXISTS memory_search_document_truncate ON memory_searchdocument""",
    """DROP TRIGGER IF EXISTS memory_search_document_update ON memory_searchdocument""",
    """DROP TRIGGER IF EXISTS memory_search_document_delete ON memory_searchdocument""",
    """DROP TRIGGER IF EXISTS memory_search_document_insert ON memory_searchdocument""",
    COPY_BACK,
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
    """CREATE TRIGGER memory_search_message_insert AFTER INSERT ON conversations_message
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_search_inserted()""",
    """CREATE TRIGGER memory_search_message_delete AFTER DELETE ON conversations_message
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_search_deleted()""",
    """CREATE TRIGGER memory_search_message_update AFTER UPDATE ON conversations_message
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_updated()""",
    """CREATE TRIGGER memory_search_message_truncate AFTER TRUNCATE ON conversations_message
        FOR EACH STATEMENT EXECUTE FUNCTION memory_search_truncated()""",
]


def _run(statements):
    def run(apps, schema_editor):
        with schema_editor.connection.cursor() as cursor:
            for statement in statements.get(schema_editor.connection.vendor, []):
                cursor.execute(statement)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0016_modelcall_prompt_message'),
        ('memory', '0015_note_proposal_changes_and_versions_kept'),
    ]

    operations = [
        migrations.CreateModel(
            name='SearchDocument',
            fields=[
                ('message', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='search_document', serialize=False, to='conversations.message')),
                ('text', models.TextField(blank=True, default='')),
                ('terms', models.TextField(blank=True, default='', editable=False)),
                ('context', models.TextField(blank=True, default='', editable=False)),
                ('tokens', models.PositiveIntegerField(default=0, editable=False)),
                ('session', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.session')),
            ],
            options={
                'indexes': [models.Index(fields=['session', 'message'], name='searchdocument_session_message')],
            },
        ),
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARDS, "postgresql": POSTGRES_FORWARDS}),
            _run({"sqlite": SQLITE_BACKWARDS, "postgresql": POSTGRES_BACKWARDS}),
        ),
    ]
