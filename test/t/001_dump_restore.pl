# Filters survive pg_dump / pg_restore byte for byte: plain and custom formats
# (text output and input), and COPY in binary format (send and recv).  Covers
# both kinds, several key families, a NULL, empty filters and a filter large
# enough to be TOASTed; the restored filters must also answer every probe as
# the originals do.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use BloomamqScale;

# BLOOMAMQ_TEST_SCALE (BloomamqScale.pm; tools/valgrind-check sets it for
# servers under memcheck) shrinks the large filter and the indexed table
# (below) and the probes (further below); what is checked is the same.
# keys of the large filter: still over 100 kB at the smallest (by 10 bits a key)
my $nlarge = scaled(300000, 120000);
# rows of the table with the amq index: still several ranges of 8 pages
my $nev = scaled(50000, 10000);

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
# The restored index is compared byte for byte with a fresh build over the
# same heap.  From 16 COPY extends a heap in bulk; an autovacuum between the
# restore and the fresh build would truncate the empty tail under the
# restored index (seen under memcheck, where the test runs slowly): the two
# builds would then have seen different heaps.
$node->append_conf('postgresql.conf', 'autovacuum = off');
$node->start;

my $tmp = PostgreSQL::Test::Utils::tempdir;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql(
	'src', q{
CREATE EXTENSION bloomamq;
-- fam says which probe keys fit the filter
CREATE TABLE filters (id int PRIMARY KEY, fam text NOT NULL, note text, f amqfilter);

INSERT INTO filters
SELECT 1, 'int', 'bloom int8', amq_agg(i::int8, 0.01, 'bloom') FROM generate_series(1, 1000) i
UNION ALL
SELECT 2, 'int', 'blocked int8', amq_agg(i::int8, 0.01, 'blocked') FROM generate_series(1, 1000) i
UNION ALL
SELECT 3, 'int', 'default kind int4', amq_agg(i) FROM generate_series(1, 500) i
UNION ALL
SELECT 4, 'text', 'bloom text', amq_agg('user_' || i, 0.01, 'bloom') FROM generate_series(1, 1000) i
UNION ALL
SELECT 5, 'text', 'blocked text', amq_agg('user_' || i, 0.001, 'blocked') FROM generate_series(1, 1000) i
UNION ALL
SELECT 6, 'uuid', 'bloom uuid', amq_agg(md5(i::text)::uuid, 0.05, 'bloom') FROM generate_series(1, 1000) i
UNION ALL
SELECT 7, 'uuid', 'blocked uuid', amq_agg(md5(i::text)::uuid, 0.01, 'blocked') FROM generate_series(1, 1000) i
UNION ALL
SELECT 8, 'int', 'NULL', NULL::amqfilter
UNION ALL
SELECT 9, 'int', 'empty blocked', amq_new('blocked', 1000)
UNION ALL
SELECT 10, 'int', 'empty bloom', amq_new('bloom', 1000, 0.001)
UNION ALL
SELECT 11, 'int', 'from array', amq_from_array(ARRAY[1, 2, 3, 1000])
UNION ALL
SELECT 12, 'text', 'amq_add', amq_add(amq_add(amq_new('bloom', 100), 'user_1'::text), 'user_2'::text)
UNION ALL
SELECT 13, 'int', 'large (TOAST)', amq_agg(i::int8, 0.01, 'blocked') FROM generate_series(1, } . $nlarge . q{) i;

-- a table with an amq index of two columns, with options
CREATE TABLE ev (id int8, k text);
INSERT INTO ev SELECT (i * 7919) % 100003, 'user_' || i FROM generate_series(1, } . $nev . q{) i;
CREATE INDEX ev_amq ON ev USING amq (id, k) WITH (pages_per_range = 8, fpr = 0.001);
});

# Bytes of every filter, in id order: "id:length:md5" (or id:NULL).
my $bytes_sql = q{
SELECT string_agg(id || ':' || coalesce(octet_length(f::bytea) || ':' || md5(f::bytea), 'NULL'),
                  E'\n' ORDER BY id)
FROM filters};

# Answers to 2,000 probes per filter, keys of its family, half of them added:
# "id:positives:md5 of the answer string".  Under BLOOMAMQ_TEST_SCALE, every
# 10th key at most, still half of them added.
my $step = int(1 / scale()) < 10 ? int(1 / scale()) : 10;
my $probe_sql = q{
SELECT string_agg(id || ':' || coalesce(p::text, 'NULL'), E'\n' ORDER BY id)
FROM (
	SELECT id,
		(SELECT count(*) FILTER (WHERE a) || ':' || md5(string_agg(coalesce(a::text, 'n'), '' ORDER BY k))
		 FROM generate_series(1, 2000, } . $step . q{) k,
		      LATERAL (SELECT CASE fam
		                   WHEN 'int' THEN f @> k::int8
		                   WHEN 'text' THEN f @> ('user_' || k)
		                   WHEN 'uuid' THEN f @> md5(k::text)::uuid
		               END AS a) x) AS p
	FROM filters) s};

my $bytes  = $node->safe_psql('src', $bytes_sql);
my $probes = $node->safe_psql('src', $probe_sql);

# Sanity of the originals, so that equality below means something.
is($node->safe_psql('src', 'SELECT count(*) FROM filters'), '13', 'source has 13 rows');
is($node->safe_psql('src', 'SELECT count(*) FROM filters WHERE f IS NULL'), '1', 'one NULL filter');
like($bytes, qr/^13:(\d+):/m, 'large filter present');
my ($large) = $bytes =~ /^13:(\d+):/m;
cmp_ok($large, '>', 100_000, 'large filter is over 100 kB (stored in TOAST)');
is( $node->safe_psql(
		'src', q{
SELECT count(*) FROM filters, generate_series(1, 1000) k
WHERE id IN (1, 2) AND NOT f @> k::int8}), '0', 'no false negatives in the source');

# The amq index: its definition, its pages past each page's LSN and
# checksum (the first 10 bytes), and lookups through it.
$node->safe_psql('src', 'CREATE EXTENSION pageinspect');
my $index_def_sql = q{SELECT pg_get_indexdef('ev_amq'::regclass)};
my $index_bytes_sql = q{
SELECT count(*) || ':' || md5(string_agg(substr(get_raw_page('ev_amq', g::int), 11), '' ORDER BY g))
FROM generate_series(0, pg_relation_size('ev_amq') / 8192 - 1) g};
# the heap's size and where each row sits in it
my $heap_layout_sql = q{
SELECT pg_relation_size('ev') || ':' || md5(string_agg(ctid::text || ':' || id, ',' ORDER BY ctid))
FROM ev};
my $index_lookup_sql = q{
SET enable_seqscan = off;
SELECT string_agg(p || ':' || (SELECT count(*) FROM ev WHERE id = p), ',' ORDER BY p)
FROM generate_series(0, 3000, 7) p};
like($node->safe_psql('src', "SET enable_seqscan = off; EXPLAIN (COSTS OFF) SELECT * FROM ev WHERE id = 5"),
	qr/Bitmap Index Scan on ev_amq/, 'lookups in the source use the amq index');

# Compare a restored database with the source.
sub check_db
{
	my ($db, $how) = @_;
	is($node->safe_psql($db, $bytes_sql), $bytes, "$how: filter bytes identical");
	is($node->safe_psql($db, $probe_sql), $probes, "$how: probes answer the same");
	is( $node->safe_psql($db, "SELECT string_agg(id || ':' || coalesce(note, ''), ',' ORDER BY id) FROM filters"),
		$node->safe_psql('src', "SELECT string_agg(id || ':' || coalesce(note, ''), ',' ORDER BY id) FROM filters"),
		"$how: other columns identical");
	return if $how eq 'binary COPY';
	is($node->safe_psql($db, $index_def_sql), $node->safe_psql('src', $index_def_sql),
		"$how: amq index restored with its definition and options");
	# The restored index is the build over the restored heap: identical
	# to a fresh build there, and to the source's index when the heap has
	# the source's layout (COPY extends a heap in bulk from 16, so the
	# restored heap may have more pages, and so more ranges).
	my $restored = $node->safe_psql($db, $index_bytes_sql);
	(my $fresh_def = $node->safe_psql($db, $index_def_sql)) =~ s/INDEX ev_amq ON/INDEX ev_amq_fresh ON/;
	$node->safe_psql($db, $fresh_def);
	(my $fresh_sql = $index_bytes_sql) =~ s/'ev_amq'/'ev_amq_fresh'/g;
	is($restored, $node->safe_psql($db, $fresh_sql),
		"$how: amq index pages identical to a fresh build byte for byte (but their WAL positions)");
	$node->safe_psql($db, 'DROP INDEX ev_amq_fresh');
	if ($node->safe_psql($db, $heap_layout_sql) eq $node->safe_psql('src', $heap_layout_sql))
	{
		is($restored, $node->safe_psql('src', $index_bytes_sql),
			"$how: amq index pages identical to the source's (same heap layout)");
	}
	else
	{
		is($node->safe_psql($db, 'SELECT current_setting(\'server_version_num\')::int >= 160000'), 't',
			"$how: heap laid out differently from the source's, as COPY does from 16");
	}
	is($node->safe_psql($db, $index_lookup_sql), $node->safe_psql('src', $index_lookup_sql),
		"$how: lookups through the amq index answer the same");
	# nothing to reseal or give back: VACUUM (autovacuum's too) leaves the
	# index's pages as they are (it may truncate the heap's empty tail)
	$node->safe_psql($db, 'VACUUM ev');
	is($node->safe_psql($db, $index_bytes_sql), $restored,
		"$how: VACUUM leaves an index as built as it was");
}

# Plain format: text output and input of amqfilter through psql.
$node->command_ok([ 'pg_dump', '-d', 'src', '-f', "$tmp/plain.sql" ], 'pg_dump plain');
$node->safe_psql('postgres', 'CREATE DATABASE dst_plain');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'dst_plain', '-f', "$tmp/plain.sql" ],
	'restore plain dump with psql');
check_db('dst_plain', 'plain dump');

# Custom format through pg_restore.
$node->command_ok([ 'pg_dump', '-Fc', '-d', 'src', '-f', "$tmp/dump.custom" ], 'pg_dump custom');
$node->safe_psql('postgres', 'CREATE DATABASE dst_custom');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'dst_custom', "$tmp/dump.custom" ],
	'pg_restore custom dump');
check_db('dst_custom', 'custom dump');

# Binary COPY: the type's send and recv.
$node->safe_psql('src', "COPY filters TO '$tmp/filters.bin' (FORMAT binary)");
$node->safe_psql('postgres', 'CREATE DATABASE dst_binary');
$node->safe_psql(
	'dst_binary', qq{
CREATE EXTENSION bloomamq;
CREATE TABLE filters (id int PRIMARY KEY, fam text NOT NULL, note text, f amqfilter);
COPY filters FROM '$tmp/filters.bin' (FORMAT binary);
});
check_db('dst_binary', 'binary COPY');

$node->stop;
done_testing();
