-- Golden vectors (test/vectors/kinds, written by tools/golden-vectors):
-- filters of every kind and key family built from fixed keys.  For each:
-- (a) today's build from the same keys, in each of the family's types,
-- gives the stored bytes; (b) the stored bytes still parse (text input and
-- the bytea cast), hold every key, and answer every absent key as recorded.

SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

CREATE TABLE vec_manifest (name text PRIMARY KEY, kind text, keyset text, types text,
	fpr float8, method text, capacity text, key_family text, keys bigint, bytes int,
	sha256 text, absent int, absent_maybe int, answers text, ord serial);
CREATE TABLE vec_keys (keyset text, id bigserial, v text);
CREATE TABLE vec_absent (keyset text, id bigserial, v text);
CREATE TABLE vec_stored (name text, b64 text);

\copy vec_manifest (name, kind, keyset, types, fpr, method, capacity, key_family, keys, bytes, sha256, absent, absent_maybe, answers) FROM 'test/vectors/kinds/MANIFEST.tsv' (FORMAT csv, DELIMITER E'\t', HEADER)
-- the key sets and one file per filter (a generated list of \copy commands)
\set ECHO none
\i test/vectors/kinds/load.psql
\set ECHO all

SELECT keyset, k.n AS keys, a.n AS absent,
	(SELECT count(*) FROM vec_manifest m WHERE m.keyset = k.keyset) AS vectors
FROM (SELECT keyset, count(*) AS n FROM vec_keys GROUP BY 1) k
	JOIN (SELECT keyset, count(*) AS n FROM vec_absent GROUP BY 1) a USING (keyset)
ORDER BY keyset;
SELECT kind, count(*) AS vectors FROM vec_manifest GROUP BY 1 ORDER BY min(ord);
-- one stored filter per manifest line, and no other
SELECT count(*) AS manifest, count(s.name) AS stored,
	(SELECT count(*) FROM vec_stored) AS files
FROM vec_manifest m LEFT JOIN vec_stored s USING (name);

-- The build of a vector, as tools/golden-vectors makes it: 'agg' is
-- amq_agg(key, fpr, kind ORDER BY id), 'cap' the same with a capacity,
-- 'add' amq_add(amq_new(kind, capacity, fpr), the keys in order).
CREATE FUNCTION pg_temp.build(m vec_manifest, typ text) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
	b bytea;
BEGIN
	EXECUTE format(CASE m.method
				   WHEN 'agg' THEN 'SELECT amq_agg(v::%1$s, $1, $2 ORDER BY id)::bytea'
				   WHEN 'cap' THEN 'SELECT amq_agg(v::%1$s, $1, $2, $4 ORDER BY id)::bytea'
				   WHEN 'add' THEN 'SELECT amq_add(amq_new($2, $4, $1), array_agg(v::%1$s ORDER BY id))::bytea'
				   END || ' FROM vec_keys WHERE keyset = $3', typ)
	INTO STRICT b USING m.fpr, m.kind, m.keyset, nullif(m.capacity, '-')::bigint;
	RETURN b;
END $$;

-- A key some type cannot hold on this server (numeric's Infinity and
-- -Infinity, which PostgreSQL 13 lacks) makes that type unbuildable here:
-- check_vector skips it, and only 13 may skip, only numeric.
CREATE FUNCTION pg_temp.holds(v text, typ text) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('SELECT $1::%s', typ) USING v;
	RETURN true;
EXCEPTION WHEN invalid_text_representation THEN
	RETURN false;
END $$;
-- Each key is tried once per type of its key set (not once per vector).
CREATE TEMP TABLE vec_unheld AS
SELECT DISTINCT kt.keyset, kt.typ
FROM (SELECT DISTINCT m.keyset, t.typ
	  FROM vec_manifest m, unnest(string_to_array(m.types, ',')) t(typ)) kt,
	(SELECT keyset, v FROM vec_keys UNION SELECT keyset, v FROM vec_absent) k
WHERE k.keyset = kt.keyset AND NOT pg_temp.holds(k.v, kt.typ);
SELECT coalesce(bool_and(typ = 'numeric'
		AND current_setting('server_version_num')::int < 140000), true)
	AS unbuildable_only_numeric_infinity_before_14
FROM vec_unheld;

-- Check one vector in each of its types.  stored_ok: the stored text
-- parses as a filter (text input, and its bytes through the bytea cast),
-- and its length, SHA-256, key count and family are the manifest's.
CREATE FUNCTION pg_temp.check_vector(m vec_manifest, b64 text,
	OUT same_bytes bool, OUT stored_ok text, OUT false_negatives bigint,
	OUT absent_maybe int, OUT absent_as_stored bool)
LANGUAGE plpgsql AS $$
DECLARE
	stored bytea := decode(b64, 'base64');
	f amqfilter;
	t text;
	n bigint;
	ans text;
BEGIN
	BEGIN
		f := b64::amqfilter;
		stored_ok := CASE WHEN f::bytea = stored
							AND stored::amqfilter::bytea = stored
							AND octet_length(stored) = m.bytes
							AND encode(sha256(stored), 'hex') = m.sha256
							AND amq_count(f) = m.keys
							AND amq_info(f) ->> 'key_family' = m.key_family
						  THEN 'ok' ELSE 'differs from the manifest' END;
	EXCEPTION WHEN OTHERS THEN
		stored_ok := SQLSTATE || ': ' || SQLERRM;
		RETURN;
	END;
	same_bytes := true;
	false_negatives := 0;
	absent_as_stored := true;
	absent_maybe := length(m.answers) - length(replace(m.answers, 't', ''));
	FOREACH t IN ARRAY string_to_array(m.types, ',') LOOP
		CONTINUE WHEN EXISTS (SELECT 1 FROM vec_unheld u WHERE u.keyset = m.keyset AND u.typ = t);
		same_bytes := same_bytes AND pg_temp.build(m, t) = stored;
		EXECUTE format('SELECT count(*) FROM vec_keys WHERE keyset = $2 AND NOT $1 @> v::%s', t)
		INTO n USING f, m.keyset;
		false_negatives := false_negatives + n;
		EXECUTE format('SELECT string_agg(CASE WHEN $1 @> v::%s THEN ''t'' ELSE ''f'' END, '''' ORDER BY id)
						FROM vec_absent WHERE keyset = $2', t)
		INTO ans USING f, m.keyset;
		absent_as_stored := absent_as_stored AND ans = m.answers;
	END LOOP;
END $$;

SELECT m.name, m.types, c.*
FROM vec_manifest m JOIN vec_stored s USING (name),
	LATERAL pg_temp.check_vector(m, s.b64) c
ORDER BY m.ord;

-- Format version 1 vectors whose build changed with version 2
-- (test/vectors/kinds-v1: scalable aggregates, whose first stage is now
-- sized for their keys, and xor and fuse filters, now peeled
-- breadth-first).
-- Frozen: they still parse, are version 1, hold every key and answer every
-- absent key as recorded; today's build of the same keys is version 2, its
-- manifest entry in kinds/.
CREATE TABLE vec1_manifest (LIKE vec_manifest INCLUDING DEFAULTS);
CREATE TABLE vec1_stored (name text, b64 text);
\copy vec1_manifest (name, kind, keyset, types, fpr, method, capacity, key_family, keys, bytes, sha256, absent, absent_maybe, answers) FROM 'test/vectors/kinds-v1/MANIFEST.tsv' (FORMAT csv, DELIMITER E'\t', HEADER)
\copy vec1_stored FROM 'test/vectors/kinds-v1/FILTERS.tsv' (FORMAT csv, DELIMITER E'\t', HEADER)
SELECT m.name, c.stored_ok, c.false_negatives, c.absent_as_stored,
	amq_info(s.b64::amqfilter) ->> 'format_version' AS version,
	amq_info(n.b64::amqfilter) ->> 'format_version' AS version_built_now,
	(amq_info(s.b64::amqfilter) ->> 'bits_per_key')::numeric(4,1) AS bits_per_key,
	(amq_info(n.b64::amqfilter) ->> 'bits_per_key')::numeric(4,1) AS bits_per_key_now
FROM vec1_manifest m JOIN vec1_stored s USING (name)
	JOIN vec_stored n USING (name),
	LATERAL pg_temp.check_vector(m::text::vec_manifest, s.b64) c
ORDER BY m.name;

-- the same key set gives other bytes in another kind, rate or hashing
SELECT count(DISTINCT sha256) = count(*) AS all_vectors_differ FROM vec_manifest;
-- bpchar drops trailing spaces, text keeps them: 'alice' and 'alice   ',
-- '' and ' ' are two bpchar keys and four text keys
SELECT name, keys FROM vec_manifest WHERE name IN ('bloom-text', 'bloom-bpchar') ORDER BY name;
SELECT b @> 'alice  '::bpchar AS bpchar_alice, b @> 'alice'::text AS text_alice,
	t @> 'alice   '::text AS text_alice_spaces, t @> 'bob'::text AS text_bob_no_space
FROM (SELECT b64::amqfilter AS b FROM vec_stored WHERE name = 'bloom-bpchar') x,
	(SELECT b64::amqfilter AS t FROM vec_stored WHERE name = 'bloom-text') y;
-- the "other" family records its type and is marked not portable
SELECT amq_info(b64::amqfilter) ->> 'key_type' AS key_type,
	amq_info(b64::amqfilter) ->> 'portable' AS portable
FROM vec_stored WHERE name = 'bloom-other';
