# The amq index under WAL: a streaming standby answers every lookup as the
# primary does after inserts (into sealed ranges too), deletes and VACUUM's
# reseals; and after an immediate stop in the middle of inserts, recovery
# leaves every committed row findable through the index, also at
# wal_level = minimal for an index built with its table.

use strict;
use warnings;

use IPC::Run;
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use BloomamqScale;

# BLOOMAMQ_TEST_SCALE (BloomamqScale.pm; tools/valgrind-check sets it for
# servers under memcheck) shrinks the probes and the rows inserted
# before the crash, not what is asserted.

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
# No autovacuum: an autoanalyze's snapshot, taken before a DELETE commits,
# keeps the deleted rows from the next VACUUM, which then frees no space in
# the index, and the check of the truncation below would fail.
$primary->append_conf('postgresql.conf', 'autovacuum = off');
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION bloomamq;
CREATE TABLE t (id int8, k text, pad text);
INSERT INTO t SELECT g, 'k' || g, repeat('p', 40) FROM generate_series(1, 20000) g;
CREATE INDEX t_amq ON t USING amq (id, k) WITH (pages_per_range = 4);
});

$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;

# every probe, by index on the node, against a sequential scan on the
# primary: keys spread over the original rows and the inserted ones
my ($np1, $np2) = (scaled(700, 40), scaled(300, 20));
my $probes = join(',', map { int($_ * 700 / $np1) * 37 } 1 .. $np1) . ','
  . join(',', map { 100000 + int($_ * 300 / $np2) * 3 } 1 .. $np2);
sub compare
{
	my ($node, $what) = @_;
	my $by_index = $node->safe_psql('postgres', qq{
SET enable_seqscan = off;
SELECT string_agg(p::text || ':' || (SELECT count(*) FROM t WHERE id = p AND k = 'k' || p), ',' ORDER BY p)
FROM unnest(ARRAY[$probes]::int8[]) p;
});
	my $by_seqscan = $primary->safe_psql('postgres', qq{
SET enable_bitmapscan = off;
SELECT string_agg(p::text || ':' || (SELECT count(*) FROM t WHERE id = p AND k = 'k' || p), ',' ORDER BY p)
FROM unnest(ARRAY[$probes]::int8[]) p;
});
	is($by_index, $by_seqscan, "$what: lookups by index on the " . $node->name . " match a sequential scan");
	my $plan = $node->safe_psql('postgres', q{
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM t WHERE id = 5;
});
	like($plan, qr/Bitmap Index Scan on t_amq/, "$what: the " . $node->name . " uses the index");
}

$primary->wait_for_catchup($standby);
compare($standby, 'after the build');

# free space in sealed ranges, then inserts land there (overflow segments)
$primary->safe_psql('postgres', q{
DELETE FROM t WHERE id % 5 = 0;
VACUUM t;
INSERT INTO t SELECT 100000 + g, 'k' || (100000 + g), 'x' FROM generate_series(1, 2000) g;
});
$primary->wait_for_catchup($standby);
compare($standby, 'after inserts into sealed ranges');
compare($primary, 'after inserts into sealed ranges');

# deletes and the reseal of VACUUM
$primary->safe_psql('postgres', q{
DELETE FROM t WHERE id % 7 = 0;
VACUUM t;
INSERT INTO t SELECT 101000 + g, 'k' || (101000 + g), 'y' FROM generate_series(1, 1000) g;
});
$primary->wait_for_catchup($standby);
compare($standby, 'after delete and vacuum');

# VACUUM with parallel workers (the two btrees are over
# min_parallel_index_scan_size), whose leader cleans up the amq index in
# parallel mode and truncates it as the table's VACUUM commits: the
# standby replays the truncation, its index ends where the primary's does,
# and it answers as before.  With FREEZE, so that VACUUM waits for the
# cleanup lock of a page that another process has pinned instead of passing
# over it and its deleted rows.
$primary->safe_psql('postgres', q{
CREATE INDEX t_id_bt ON t (id);
CREATE INDEX t_k_bt ON t (k);
});
my @sizes;
for my $round (
	'DELETE FROM t WHERE id % 11 = 0',
	"INSERT INTO t SELECT 102000 + g, 'k' || (102000 + g), 'z' FROM generate_series(1, 2000) g",
	'DELETE FROM t WHERE id % 13 = 0')
{
	push @sizes, $primary->safe_psql('postgres', qq{
SET min_parallel_index_scan_size = '256kB';
$round;
VACUUM (PARALLEL 2, FREEZE) t;
SELECT pg_relation_size('t_amq');
});
}
cmp_ok($sizes[-1], '<', (sort { $b <=> $a } @sizes)[0],
	"a VACUUM with parallel workers truncated the index (sizes @sizes)");
$primary->safe_psql('postgres', 'DROP INDEX t_id_bt, t_k_bt');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', "SELECT pg_relation_size('t_amq')"), $sizes[-1],
	'the standby replayed the truncation');
compare($standby, 'after a VACUUM with parallel workers');

# amq_index_check on the standby while replay changes the index: deletes,
# inserts and VACUUM's reseals on the primary, checks in a loop on the
# standby.  Replay takes no heavyweight lock, so a check may read pages from
# before and after a record: what looks corrupted then is checked again,
# and no corruption may be reported.  Nor may replay wait on a check (it
# locks a directory page, then the metapage): the standby must catch up.
$primary->safe_psql('postgres', q{
CREATE TABLE w (id int8, k text);
INSERT INTO w SELECT g, 'k' || g FROM generate_series(1, 20000) g;
CREATE INDEX w_amq ON w USING amq (id, k) WITH (pages_per_range = 2);
});
$primary->wait_for_catchup($standby);
my $churn = $primary->basedir . '/churn.sql';
append_to_file($churn, q{
\set i random(0, 10)
DELETE FROM w WHERE id % 11 = :i AND id <= 20000;
INSERT INTO w SELECT 100000 + g, 'k' || g FROM generate_series(1, 2000) g;
VACUUM w;
});
# at least $load_secs of load and 5 checks (a check under memcheck takes
# seconds); pgbench is stopped after them
my $load_secs = scaled(15, 6);
my ($lout, $lerr) = ('', '');
my $load = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--client=1', '--time=' . ($load_secs + 600),
		'-h', $primary->host, '-p', $primary->port, '-f', $churn, 'postgres'
	],
	'>', \$lout, '2>', \$lerr);
my ($checks, $failures, $retries) = (0, 0, 0);
my $until = time() + $load_secs;
while (time() < $until || $checks < 5)
{
	my ($o, $e, $timed_out) = ('', '');
	my $heap = $checks % 2 ? 'true' : 'false';
	my $rc = $standby->psql('postgres',
		"SET client_min_messages = debug1; SELECT amq_index_check('w_amq', $heap);",
		stdout => \$o, stderr => \$e, timeout => 300, timed_out => \$timed_out);
	$checks++;
	$retries += () = $e =~ /checking again/g;
	if ($rc != 0 || $timed_out)
	{
		$failures++;
		diag("check $checks on the standby: " . ($timed_out ? 'timed out' : $e));
	}
}
$load->kill_kill;
unlike($lerr, qr/ERROR|abort/, 'the deletes, inserts and VACUUMs on the primary ran without an error');
is($failures, 0, "$checks checks on the standby during replay report no corruption");
note("they checked again $retries times after replay moved on");
cmp_ok($primary->safe_psql('postgres', 'SELECT count(*) FROM w WHERE id > 100000'), '>', 0,
	'the load inserted rows');
my $end_lsn = $primary->lsn('insert');
$primary->wait_for_catchup($standby, 'replay', $end_lsn);
is($standby->safe_psql('postgres', "SELECT pg_last_wal_replay_lsn() >= '$end_lsn'::pg_lsn"),
	't', 'replay went on past the checks: the standby caught up');
$standby->safe_psql('postgres', "SELECT amq_index_check('w_amq', true)");
$primary->safe_psql('postgres', "SELECT amq_index_check('w_amq', true)");
is($standby->safe_psql('postgres', q{
SET enable_seqscan = off;
SELECT count(*) FROM w WHERE id = 100001;
}), $primary->safe_psql('postgres', q{
SET enable_seqscan = off;
SELECT count(*) FROM w WHERE id = 100001;
}), 'the standby finds the rows inserted during the checks, as the primary');

# the standby, promoted, goes on taking inserts through the index
$standby->promote;
$standby->safe_psql('postgres', q{
INSERT INTO t SELECT 200000 + g, 'k' || (200000 + g), 'z' FROM generate_series(1, 500) g;
});
is($standby->safe_psql('postgres', q{
SET enable_seqscan = off;
SELECT count(*) FROM unnest(ARRAY(SELECT generate_series(200001, 200500)::int8)) p
WHERE EXISTS (SELECT 1 FROM t WHERE id = p);
}), '500', 'the promoted standby finds the rows inserted after promotion');
$standby->stop;

# Crash recovery: committed inserts run in the background, one transaction
# each, until an immediate stop; then every committed row must be found.
$primary->safe_psql('postgres', q{
CREATE TABLE c (id int8, pad text);
INSERT INTO c SELECT g, repeat('q', 60) FROM generate_series(1, 5000) g;
CREATE INDEX c_amq ON c USING amq (id) WITH (pages_per_range = 2);
DELETE FROM c WHERE id % 3 = 0;
VACUUM c;
});
my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[
		'psql', '-X', '-d', $primary->connstr('postgres'), '-c', q{
DO $$
BEGIN
	FOR i IN 1..200000 LOOP
		INSERT INTO c VALUES (1000000 + i, 'r');
		COMMIT;
	END LOOP;
END
$$;}
	],
	'>', \$out, '2>', \$err);
my $n = 0;
my $nwant = scaled(3000, 300);
for (my $i = 0; $i < 600 && $n < $nwant; $i++)
{
	usleep(100_000);
	$n = $primary->safe_psql('postgres', 'SELECT count(*) FROM c WHERE id > 1000000');
}
cmp_ok($n, '>=', $nwant, 'inserts were running when the server stopped');
$primary->stop('immediate');
$h->finish;
$primary->start;

my $committed = $primary->safe_psql('postgres', 'SELECT count(*) FROM c WHERE id > 1000000');
cmp_ok($committed, '>=', $n, "$committed committed rows survive the crash");
# one index lookup per committed row: a nested loop over the index
my $anti = q{
SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off;
SELECT count(*) FROM (SELECT id FROM c WHERE id > 1000000 OFFSET 0) r
WHERE NOT EXISTS (SELECT 1 FROM c WHERE c.id = r.id);
};
like($primary->safe_psql('postgres', $anti =~ s/SELECT count/EXPLAIN (COSTS OFF) SELECT count/r),
	qr/Nested Loop Anti Join.*Bitmap Index Scan on c_amq/s,
	'each committed row is looked up through the recovered index');
is($primary->safe_psql('postgres', $anti), '0',
	'after recovery every committed row is found through the index');
# and it goes on working
$primary->safe_psql('postgres', 'INSERT INTO c VALUES (-1, \'after\')');
is($primary->safe_psql('postgres', q{
SET enable_seqscan = off;
SELECT count(*) FROM c WHERE id = -1;
}), '1', 'an insert after recovery is found');

$primary->stop;

# wal_level = minimal: an index built in the transaction that created or
# truncated its table writes no WAL of its own (PostgreSQL syncs or logs
# such relations at commit); after an immediate stop every committed row
# is found through it, and the check passes.
my $minimal = PostgreSQL::Test::Cluster->new('minimal');
$minimal->init;
$minimal->append_conf('postgresql.conf', "wal_level = minimal\nmax_wal_senders = 0");
$minimal->start;
my $nmin = scaled(100000, 10000);
$minimal->safe_psql('postgres', qq{
CREATE EXTENSION bloomamq;
BEGIN;
CREATE TABLE m (id int8, k text);
INSERT INTO m SELECT g, 'k' || g FROM generate_series(1, $nmin) g;
CREATE INDEX m_amq ON m USING amq (id, k) WITH (pages_per_range = 8);
INSERT INTO m SELECT -g, 'k' || -g FROM generate_series(1, 1000) g;
COMMIT;
CREATE TABLE t2 (id int8);
INSERT INTO t2 SELECT g FROM generate_series(1, 1000) g;
BEGIN;
TRUNCATE t2;
CREATE INDEX t2_amq ON t2 USING amq (id);
INSERT INTO t2 SELECT g FROM generate_series(1, 5000) g;
COMMIT;
});
$minimal->stop('immediate');
$minimal->start;
is($minimal->safe_psql('postgres', q{
SELECT amq_index_check('m_amq', true); SELECT amq_index_check('t2_amq', true); SELECT 'ok'}),
	"\n\nok", 'wal_level = minimal: after a crash both indexes pass the check with heapallindexed');
is($minimal->safe_psql('postgres', qq{
SET enable_seqscan = off;
SELECT count(*) FROM unnest(ARRAY[1, $nmin, -1, -1000]) p WHERE EXISTS (SELECT 1 FROM m WHERE id = p AND k = 'k' || p);
SELECT count(*) FROM unnest(ARRAY[1, 5000, 5001]) p WHERE EXISTS (SELECT 1 FROM t2 WHERE id = p);
}), "4\n2", 'wal_level = minimal: after a crash the committed rows are found through the indexes');
$minimal->stop;
done_testing();
