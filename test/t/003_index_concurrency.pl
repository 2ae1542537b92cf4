# Concurrent inserts, lookups and VACUUM on an amq index lose no row.
# Inserters add rows (many into sealed ranges, as the table has free space
# in old pages), readers look up rows that exist throughout and fail on a
# miss, and VACUUM reseals ranges meanwhile; at the end every row is found
# through the index.  Then CREATE INDEX CONCURRENTLY and REINDEX INDEX
# CONCURRENTLY run in a loop under writes, and the index they build finds
# every row.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

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

# CREATE INDEX CONCURRENTLY and REINDEX INDEX CONCURRENTLY while rows are
# inserted, updated to new keys and deleted: each build passes the check
# with heapallindexed, and at the end, with the first index dropped, every
# row is found through the one built concurrently.  (amq's bulk delete
# reports no entry, so a concurrent build's validation inserts every row's
# keys once more: they are there already, or are added.)
my $writes = $node->basedir . '/writes.sql';
append_to_file($writes, q{
INSERT INTO t SELECT v, 'k' || v, 'i' FROM (SELECT nextval('s') AS v FROM generate_series(1, 5)) n;
\set p random(1, } . $nrows . q{)
UPDATE t SET id = -id, k = 'u' || k WHERE id = :p;
DELETE FROM t WHERE id = :p + 2;
});
my $before = $node->safe_psql('postgres', 'SELECT max(id) FROM t');
my ($wout, $werr) = ('', '');
my $load = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--client=2', '--time=600',
		'-h', $node->host, '-p', $node->port, '-f', $writes, 'postgres'
	],
	'>', \$wout, '2>', \$werr);
my ($builds, $failures) = (0, 0);
my $until = time() + 10;
while (time() < $until || $builds < 3)
{
	my ($o, $e) = ('', '');
	my $rc = $node->psql('postgres', q{
DROP INDEX CONCURRENTLY IF EXISTS t_cic;
CREATE INDEX CONCURRENTLY t_cic ON t USING amq (id, k) WITH (pages_per_range = 4);
SELECT amq_index_check('t_cic', true);
REINDEX INDEX CONCURRENTLY t_cic;
SELECT amq_index_check('t_cic', true);
}, stdout => \$o, stderr => \$e, on_error_stop => 1);
	$builds++;
	if ($rc != 0)
	{
		$failures++;
		diag("concurrent build $builds: $e");
	}
}
$load->kill_kill;
unlike($werr, qr/ERROR|abort/, 'the writes during the concurrent builds ran without an error');
is($failures, 0, "$builds concurrent builds and rebuilds pass the check with heapallindexed");
is($node->safe_psql('postgres', q{
SELECT count(*) FROM pg_index WHERE indrelid = 't'::regclass AND NOT (indisvalid AND indisready)}),
	'0', 'no index is left invalid');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM t WHERE id < 0'),
	'>', 0, 'rows were updated to new keys meanwhile');
$node->safe_psql('postgres', 'DROP INDEX t_amq');
# the rows written during the builds (the check has probed every row)
my $anti_new = $anti =~ s/FROM t OFFSET 0/FROM t WHERE id < 0 OR id > $before OFFSET 0/r;
like($node->safe_psql('postgres', $anti_new =~ s/SELECT count/EXPLAIN (COSTS OFF) SELECT count/r),
	qr/Nested Loop Anti Join.*Bitmap Index Scan on t_cic/s,
	'the rows written meanwhile are looked up through the index built concurrently');
is($node->safe_psql('postgres', $anti_new), '0', 'no row is lost by the index built concurrently');

$node->stop;
done_testing();
