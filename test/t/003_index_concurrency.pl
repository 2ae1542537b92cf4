# Concurrent inserts, lookups and VACUUM on an amq index lose no row.
# Inserters add rows (many into sealed ranges, as the table has free space
# in old pages), readers look up rows that exist throughout and fail on a
# miss, and VACUUM reseals ranges meanwhile; at the end every row is found
# through the index.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# BLOOMAMQ_TEST_SCALE (a fraction, default 1; tools/valgrind-check sets it
# for servers under memcheck) shrinks the table, whose every row the end
# looks up through the index; the load runs as long.
my $scale = $ENV{BLOOMAMQ_TEST_SCALE} || 1;
my $nrows = 4 * int(7500 * $scale);
$nrows = 3000 if $nrows < 3000;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', 'autovacuum = off');
$node->start;
$node->safe_psql('postgres', qq{
CREATE EXTENSION bloomamq;
CREATE SEQUENCE s START 1000001;
CREATE TABLE t (id int8, k text, pad text);
INSERT INTO t SELECT g, 'k' || g, repeat('p', 50) FROM generate_series(1, $nrows) g;
CREATE INDEX t_amq ON t USING amq (id, k) WITH (pages_per_range = 4);
DELETE FROM t WHERE id % 4 = 0;
VACUUM t;
});

# readers fail (division by zero) on a lookup that misses a row that exists:
# ids 1, 5, ..., $nrows - 3 (p = $nrows would look up $nrows + 1, which
# never existed)
$node->pgbench(
	'--no-vacuum --client=6 --jobs=3 --time=20',
	0,
	[qr{processed: [1-9]}],
	[qr{^$}],
	'concurrent inserts, lookups and vacuum',
	{
		'insert' => q{
INSERT INTO t SELECT v, 'k' || v, 'i' FROM (SELECT nextval('s') AS v FROM generate_series(1, 5)) n;
},
		'lookup@3' => q{
\set p random(0, } . ($nrows - 1) . q{)
\set p (:p / 4) * 4 + 1
SET enable_seqscan = off;
SELECT 1 / count(*) FROM t WHERE id = :p AND k = 'k' || :p;
},
		'vacuum@1' => q{
VACUUM t;
SELECT pg_sleep(0.2);
},
	});

my $rows = $node->safe_psql('postgres', 'SELECT count(*) FROM t WHERE id > 1000000');
cmp_ok($rows, '>', 100, "$rows rows were inserted concurrently");
my $anti = q{
SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off;
SELECT count(*) FROM (SELECT id, k FROM t OFFSET 0) r
WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.id = r.id AND t.k = r.k);
};
like($node->safe_psql('postgres', $anti =~ s/SELECT count/EXPLAIN (COSTS OFF) SELECT count/r),
	qr/Nested Loop Anti Join.*Bitmap Index Scan on t_amq/s,
	'every row is looked up through the index');
is($node->safe_psql('postgres', $anti), '0', 'no row is lost by the index');

# and once more after a final reseal
$node->safe_psql('postgres', 'VACUUM t');
is($node->safe_psql('postgres', $anti), '0', 'no row is lost after the last VACUUM');

$node->stop;
done_testing();
