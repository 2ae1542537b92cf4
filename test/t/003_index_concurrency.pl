# Concurrent inserts, lookups and VACUUM on an amq index lose no row.
# Inserters add rows (many into sealed ranges, as the table has free space
# in old pages), readers look up rows that exist throughout and fail on a
# miss, and VACUUM reseals ranges meanwhile; at the end every row is found
# through the index.  Then CREATE INDEX CONCURRENTLY and REINDEX INDEX
# CONCURRENTLY run in a loop under writes, and the index they build finds
# every row.  Last, VACUUMs cancelled while they reseal, under inserts.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use FindBin;
use lib $FindBin::RealBin;
use BloomamqScale;

# BLOOMAMQ_TEST_SCALE (BloomamqScale.pm; tools/valgrind-check sets it for
# servers under memcheck) shrinks the table, whose every row the end
# looks up through the index; the load runs as long.
my $nrows = 4 * scaled(7500, 750);

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
# how many depends on the machine's speed alone (95 in one run under
# memcheck beside other suites): the check is that inserts ran at all
cmp_ok($rows, '>', 0, "$rows rows were inserted concurrently");
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

# VACUUM cancelled while it reseals ranges, as autovacuum is when a lock
# conflicts with it, while rows are inserted: each round fills the space
# the last one freed in every range (overflow segments everywhere, so the
# cleanup reseals every range), then cancels a VACUUM once it is cleaning
# up the index.  The reseals it has not finished leave their mark, the
# inserts meanwhile add their keys past it, and the next VACUUM reseals
# again; every row stays found.
my $nrows2 = 4 * scaled(15000, 1000);
$node->safe_psql('postgres', qq{
CREATE TABLE c (id int8, k text, pad text);
INSERT INTO c SELECT g, 'k' || g, repeat('p', 50) FROM generate_series(1, $nrows2) g;
CREATE INDEX c_amq ON c USING amq (id, k) WITH (pages_per_range = 4);
});
my $before_c = $node->safe_psql('postgres', "SELECT last_value FROM s");
my $cwrites = $node->basedir . '/cwrites.sql';
append_to_file($cwrites, q{
INSERT INTO c SELECT v, 'k' || v, 'i' FROM (SELECT nextval('s') AS v FROM generate_series(1, 5)) n;
});
my $cload = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--client=1', '--time=600',
		'-h', $node->host, '-p', $node->port, '-f', $cwrites, 'postgres'
	],
	'>', \$wout, '2>', \$werr);
my ($cancelled, $rounds) = (0, 0);
while ($cancelled < 5 && $rounds < 40)
{
	$rounds++;
	$node->safe_psql('postgres', qq{
DELETE FROM c WHERE id % 10 = $rounds % 10;
VACUUM c;
INSERT INTO c SELECT v, 'k' || v, 'r' FROM (SELECT nextval('s') AS v FROM generate_series(1, $nrows2 / 10)) n;
});
	# A session polls pg_stat_progress_vacuum (one session: a connection
	# per poll would be slow under memcheck) and cancels the VACUUM once it
	# is cleaning up the index, or ends when the VACUUM has ended.  The
	# VACUUM starts once the poller runs, so that the poller sees it.
	my ($pout, $perr) = ('', '');
	my $poller = IPC::Run::start(
		[
			'psql', '-XAtq', '-d', $node->connstr('postgres') . ' application_name=amq_poller',
			'-c', q{
DO $$
DECLARE
	p int;
	ph text;
	seen bool := false;
	t0 timestamptz := clock_timestamp();
BEGIN
	WHILE clock_timestamp() < t0 + interval '300 s' LOOP
		PERFORM pg_stat_clear_snapshot();
		SELECT pid, phase INTO p, ph FROM pg_stat_progress_vacuum WHERE relid = 'c'::regclass;
		IF ph = 'cleaning up indexes' THEN
			PERFORM pg_cancel_backend(p);
			RETURN;
		END IF;
		EXIT WHEN p IS NULL AND seen;
		seen := seen OR p IS NOT NULL;
		PERFORM pg_sleep(0.002);
	END LOOP;
END
$$}
		],
		'>', \$pout, '2>', \$perr);
	$node->poll_query_until('postgres', q{
SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'amq_poller' AND state = 'active'})
	  or die 'the poller did not start';
	my $verr = '';
	$node->psql('postgres', 'VACUUM c', stderr => \$verr);
	$poller->finish;
	diag("poller: $perr") if $perr ne '';
	$cancelled++ if $verr =~ /canceling statement due to user request/;
}
$cload->kill_kill;
unlike($werr, qr/ERROR|abort/, 'the inserts during the cancelled VACUUMs ran without an error');
cmp_ok($cancelled, '>=', 3, "$cancelled of $rounds VACUUMs were cancelled while cleaning up the index");
is($node->safe_psql('postgres', q{SELECT amq_index_check('c_amq', true); SELECT 'ok'}), "\nok",
	'after the cancelled VACUUMs, amq_index_check with heapallindexed passes');
# the rows inserted meanwhile (the check has probed every row)
my $anti_c = $anti =~ s/\bt\b/c/gr =~ s/FROM c OFFSET 0/FROM c WHERE id > $before_c OFFSET 0/r;
like($node->safe_psql('postgres', $anti_c =~ s/SELECT count/EXPLAIN (COSTS OFF) SELECT count/r),
	qr/Nested Loop Anti Join.*Bitmap Index Scan on c_amq/s,
	'after the cancelled VACUUMs, the rows inserted meanwhile are looked up through the index');
is($node->safe_psql('postgres', $anti_c), '0', 'no row is lost after the cancelled VACUUMs');
$node->safe_psql('postgres', 'VACUUM c');
is($node->safe_psql('postgres', q{SELECT amq_index_check('c_amq', true); SELECT 'ok'}), "\nok",
	'a VACUUM that completes reseals after them, and the check with heapallindexed passes');

$node->stop;
done_testing();
