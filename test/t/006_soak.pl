# Soak under load with crashes: an amq index loses no committed row and
# finds no deleted one across repeated kills of the server.
#
# A primary (and a streaming standby) holds a table with an amq index of
# two columns and small ranges.  Concurrent pgbench clients insert rows
# (recording each id, in the same statement, in a second table: after a
# crash what committed is exactly what that table holds), delete rows of a
# known id class (recording them likewise), look up rows known to exist
# through the index and fail (division by zero) on a miss, build filters
# with amq_agg over the table and fail on a known key probed false,
# VACUUM the table (resealing ranges) and CHECKPOINT (so that redo starts
# in the middle of the load).  After some seconds of load the
# postmaster and all its children are killed with SIGKILL, the server is
# restarted (crash recovery), and: every committed row is found through the
# index, no deleted row is, a sequential scan counts what the records say,
# and amq_index_check(heapallindexed) passes.  Three cycles; then the
# standby, caught up, answers the same and passes the same check.
#
# Only wrong answers fail the test: the clients' errors at the crash
# (connections lost) are expected, any ERROR from the server is not.
#
# SOAK_CYCLES and SOAK_SECONDS (load per cycle) lengthen the soak.
# BLOOMAMQ_TEST_SCALE (BloomamqScale.pm; tools/valgrind-check sets it for
# servers under memcheck) shrinks the original rows, each of which every
# check looks up through the index; the cycles and their load stay.

use strict;
use warnings;

use IPC::Run;
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use BloomamqScale;

my $cycles = $ENV{SOAK_CYCLES} || 3;
my $seconds = $ENV{SOAK_SECONDS} || 12;

# the original rows: ids 1 .. $norig; id % 4 = 0 deleted before the load,
# id % 4 = 2 (and inserted ids = 2 mod 4) deleted by the deleters, odd ids
# never deleted (the readers look those up)
my $norig = 4 * scaled(3000, 300);

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
# Autovacuum off: the workload's own VACUUM client reseals ranges at a known
# rate throughout every cycle, whereas autovacuum (one-minute naptime) would
# hardly run within a cycle and, when it did, only queue behind that client.
$primary->append_conf('postgresql.conf', "autovacuum = off\nmax_connections = 40");
$primary->start;
$primary->safe_psql('postgres', qq{
CREATE EXTENSION bloomamq;
CREATE SEQUENCE s START 1000001;
CREATE TABLE t (id int8, k text, pad text);
INSERT INTO t SELECT g, 'k' || g, repeat('p', 40) FROM generate_series(1, $norig) g;
CREATE INDEX t_amq ON t USING amq (id, k) WITH (pages_per_range = 4);
DELETE FROM t WHERE id % 4 = 0;
VACUUM t;
-- committed inserts and deletes, each in its row's transaction
CREATE TABLE ins (id int8 PRIMARY KEY);
CREATE TABLE del (id int8 PRIMARY KEY);
});

# The standby streams through a slot: a crash's end-of-recovery checkpoint
# may otherwise remove WAL that a standby lagging at the kill had not yet
# received, and the standby could then never catch up.
$primary->safe_psql('postgres',
	"SELECT pg_create_physical_replication_slot('standby', true)");
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
# reconnect soon after each of the primary's restarts
$standby->append_conf('postgresql.conf',
	"wal_retrieve_retry_interval = 500ms\nprimary_slot_name = 'standby'");
$standby->start;

# ---- the workload: one pgbench per role, every read through the index

my %roles = (
	# 4 rows a transaction, ids from the sequence, recorded in ins; at a
	# rate (transactions a second) that keeps the table, and so each check's
	# one index scan per row, small
	insert => {
		clients => 3,
		rate => 100,
		script => q{
\set w random(1, 60)
WITH n AS (SELECT nextval('s') AS v FROM generate_series(1, 4)),
	i AS (INSERT INTO t SELECT v, 'k' || v, repeat('i', :w) FROM n RETURNING id)
INSERT INTO ins SELECT id FROM i;
},
	},
	# an original row and an inserted one, both = 2 mod 4, recorded in del
	# (its primary key fails a row deleted twice)
	delete => {
		clients => 1,
		rate => 30,
		script => q{
\set p random(0, } . ($norig / 4 - 1) . q{)
\set p 4 * :p + 2
SELECT last_value AS hi FROM s \gset
\set q random(1000001, :hi)
\set q (:q / 4) * 4 + 2
WITH d AS (DELETE FROM t WHERE id IN (:p, :q) RETURNING id)
INSERT INTO del SELECT id FROM d;
},
	},
	# an odd original row; the three newest inserted rows never deleted and
	# one at random: each must be found, or division by zero
	lookup => {
		clients => 2,
		script => q{
\set p random(0, } . ($norig / 2 - 1) . q{)
\set p 2 * :p + 1
SELECT 1 / count(*) FROM t WHERE id = :p AND k = 'k' || :p;
SELECT last_value AS hi FROM s \gset
\set q random(1000001, :hi)
SELECT 1 / (count(*) = count(t.id))::int
FROM ((SELECT id FROM ins WHERE id % 4 <> 2 ORDER BY id DESC LIMIT 3)
	UNION ALL (SELECT id FROM ins WHERE id >= :q AND id % 4 <> 2 ORDER BY id LIMIT 1)) r
LEFT JOIN t ON t.id = r.id AND t.k = 'k' || r.id;
},
	},
	# filters of both columns over the whole table hold an odd original key
	# and the newest inserted row never deleted
	agg => {
		clients => 1,
		script => q{
\set p random(0, } . ($norig / 2 - 1) . q{)
\set p 2 * :p + 1
SELECT 1 / (amq_agg(id) @> :p::int8 AND amq_agg(k) @> ('k' || :p)
	AND coalesce(amq_agg(id) @> (SELECT max(id) FROM ins WHERE id % 4 <> 2), true))::int
FROM t;
},
	},
	# redo after a crash starts from a checkpoint taken under load
	checkpoint => {
		clients => 1,
		script => q{
CHECKPOINT;
SELECT pg_sleep(2);
},
	},
	vacuum => {
		clients => 1,
		script => q{
VACUUM t;
SELECT pg_sleep(0.3);
},
	},
);
my @roles = sort keys %roles;
my $nclients = 0;
$nclients += $roles{$_}{clients} for @roles;
for my $role (@roles)
{
	append_to_file($primary->basedir . "/$role.sql", $roles{$role}{script});
}

sub start_load
{
	my %run;
	# every lookup through the index, also the deleters'
	local $ENV{PGOPTIONS} = '-c enable_seqscan=off -c enable_hashjoin=off -c enable_mergejoin=off';
	for my $role (@roles)
	{
		my $c = $roles{$role}{clients};
		my ($out, $err) = ('', '');
		$run{$role} = {
			out => \$out,
			err => \$err,
			h => IPC::Run::start(
				[
					'pgbench', '--no-vacuum', "--client=$c", "--jobs=$c",
					'--time=' . ($seconds + 120), '--progress=1', '-h', $primary->host,
					'-p', $primary->port,
					($roles{$role}{rate} ? ('--rate=' . $roles{$role}{rate}) : ()),
					'-f', $primary->basedir . "/$role.sql", 'postgres'
				],
				'>', \$out, '2>', \$err,
				IPC::Run::timeout($seconds + 180)),
		};
	}
	return \%run;
}

# The crash: stop the postmaster (SIGSTOP), so that it neither forks nor
# notices its children die, kill each of its children, then the postmaster,
# with SIGKILL: every process goes at once, none lives on past the crash as
# an orphan.  Children are found through /proc (Linux); elsewhere only the
# postmaster is killed, and its children exit on seeing it gone.
sub crash
{
	my ($node) = @_;
	my ($pid) = slurp_file($node->data_dir . '/postmaster.pid') =~ /^(\d+)/;
	kill 'STOP', $pid;
	my @children;
	if (opendir(my $dh, '/proc'))
	{
		for my $p (grep { /^\d+$/ } readdir($dh))
		{
			my $stat = eval { slurp_file("/proc/$p/stat") } // next;
			push @children, $p if $stat =~ /.*\)\s+\S+\s+(\d+)/s && $1 == $pid;
		}
		closedir($dh);
	}
	kill 'KILL', $_ for @children;
	$node->kill9;
	# until they are gone (and reaped), a start would see them
	for (my $i = 0; $i < 50 && grep { kill 0, $_ } $pid, @children; $i++)
	{
		usleep(50_000);
	}
	return scalar @children;
}

# Start after the crash; it fails while a killed child still holds the
# shared memory, so retry (as upstream's 017_shm.pl).
sub poll_start
{
	my ($node) = @_;
	for (my $i = 0; $i < 300; $i++)
	{
		return if $node->start(fail_ok => 1);
		usleep(100_000);
		$node->stop('fast', fail_ok => 1);
	}
	$node->start;
}

my $expected = qq{
SELECT g AS id FROM generate_series(1, $norig) g WHERE g % 4 <> 0
UNION ALL SELECT id FROM ins
EXCEPT ALL SELECT id FROM del
};
my $anti = qq{
SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off;
SELECT count(*) FROM ($expected) e
WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.id = e.id AND t.k = 'k' || e.id);
};
my $resurrected = q{
SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off;
SELECT count(*) FROM del WHERE EXISTS (SELECT 1 FROM t WHERE t.id = del.id);
};

# what the records say against the heap and the index; returns rows lost
sub verify
{
	my ($node, $what) = @_;
	my $name = $node->name;
	my $want = $node->safe_psql('postgres', "SELECT count(*) FROM ($expected) e");
	my $seq = $node->safe_psql('postgres', q{
SET enable_bitmapscan = off; SET enable_indexscan = off;
SELECT count(*) FROM t;
});
	is($seq, $want, "$what: $name: a sequential scan counts the $want rows the records give");
	like($node->safe_psql('postgres', $anti =~ s/SELECT count/EXPLAIN (COSTS OFF) SELECT count/r),
		qr/Nested Loop Anti Join.*Bitmap Index Scan on t_amq/s,
		"$what: $name: each committed row is looked up through the index");
	my $lost = $node->safe_psql('postgres', $anti);
	is($lost, '0', "$what: $name: every committed row is found through the index ("
		  . ($want - $lost) . " of $want, as the sequential scan)");
	like($node->safe_psql('postgres', $resurrected =~ s/SELECT count/EXPLAIN (COSTS OFF) SELECT count/r),
		qr/Nested Loop Semi Join.*Bitmap Index Scan on t_amq/s,
		"$what: $name: each deleted row is looked up through the index");
	is($node->safe_psql('postgres', $resurrected), '0',
		"$what: $name: no deleted row is found through the index");
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT amq_index_check('t_amq', heapallindexed => true)");
	is($ret, 0, "$what: $name: amq_index_check(heapallindexed) passes") or diag($err);
	return $lost;
}

my $lost_total = 0;
my $tx_total = 0;
my @per_cycle;
for my $cycle (1 .. $cycles)
{
	my ($ins0, $del0) = split /\|/,
	  $primary->safe_psql('postgres', 'SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM del)');
	my $run = start_load();
	my $t0 = time();
	# not sleep(): a client's exit (SIGCHLD) would cut it short
	my $until = $t0 + $seconds;
	usleep(100_000) while time() < $until;
	# Past that, until every role has finished a transaction (a progress
	# report of pgbench with a rate above 0), for at most 100 s more: under
	# memcheck on a busy machine a role's first transaction can take longer
	# than the cycle, and the crash must cut into a running load.
	my $idle_roles = sub {
		my @idle;
		for my $role (@roles)
		{
			eval { $run->{$role}{h}->pump_nb; };
			push @idle, $role
			  unless ${ $run->{$role}{err} } =~ /^progress: [\d.]+ s, (?!0\.0 tps)[\d.]+ tps/m;
		}
		return @idle;
	};
	$until = time() + 100;
	while ($idle_roles->() && time() < $until)
	{
		usleep(100_000);
	}
	note(sprintf('cycle %d: %.1f s of load', $cycle, time() - $t0));
	my $killed = crash($primary);
	note("cycle $cycle: killed the postmaster and $killed children");

	my $tx = 0;
	my %tx;
	for my $role (@roles)
	{
		my $r = $run->{$role};
		eval { $r->{h}->finish; };
		my ($out, $err) = (${ $r->{out} }, ${ $r->{err} });
		# pgbench prints the count also when clients were aborted
		$tx{$role} = $out =~ /number of transactions actually processed: (\d+)/ ? $1 : 0;
		$tx += $tx{$role};
		# lost connections are expected; a server ERROR (division by zero
		# of a missed lookup, or any other) is a wrong answer
		unlike($err, qr/division by zero/, "cycle $cycle: $role: no row missed before the crash");
		unlike($err, qr/ERROR:/, "cycle $cycle: $role: no server error before the crash")
		  or diag($err);
		# each client was running until the crash cut it off
		my $cut = grep { /client \d+ .*aborted/ && !/ERROR:/ } split /\n/, $err;
		is($cut, $roles{$role}{clients}, "cycle $cycle: $role: each of its clients ran until the crash");
		cmp_ok($tx{$role}, '>', 0, "cycle $cycle: $role: transactions ran ($tx{$role})")
		  or diag($out . $err);
	}

	poll_start($primary);
	my ($ins1, $del1) = split /\|/,
	  $primary->safe_psql('postgres', 'SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM del)');
	note(sprintf('cycle %d: %d transactions (%s), %d rows inserted, %d deleted, committed',
			$cycle, $tx, join(', ', map { "$_ $tx{$_}" } @roles), $ins1 - $ins0, $del1 - $del0));
	push @per_cycle, $tx;
	$tx_total += $tx;
	$lost_total += verify($primary, "after crash $cycle");
}

# a last reseal, then the standby
$primary->safe_psql('postgres', 'VACUUM t');
$lost_total += verify($primary, 'after the last VACUUM');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
$lost_total += verify($standby, 'caught up');
is($standby->safe_psql('postgres', "SELECT count(*) FROM ($expected) e"),
	$primary->safe_psql('postgres', "SELECT count(*) FROM ($expected) e"),
	'the standby holds the records of the primary');

my $rows = $primary->safe_psql('postgres', 'SELECT count(*) FROM t');
diag(sprintf('soak: %d clients, transactions per cycle %s (%d in all), '
		  . '%d crashes survived, %d rows at the end, rows lost: %d',
		$nclients, join('/', @per_cycle), $tx_total, $cycles, $rows, $lost_total));
is($lost_total, 0, 'rows lost: 0');

$standby->stop;
$primary->stop;
done_testing();
