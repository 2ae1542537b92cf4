# bloomamq on a Citus cluster: a coordinator and two workers on this host.
#
# Proves on distributed tables (32 shards) against local copies of the same
# rows on the coordinator:
#  - amq_agg and amq_union_agg give the same bytes for every kind, with
#    their options, without GROUP BY and grouped by the distribution column
#    and by another column;
#  - Citus splits them into partial aggregates on the workers and a combine
#    on the coordinator (worker_partial_agg / coord_combine_agg in EXPLAIN);
#  - <@ filters from a subquery and from a bind parameter select the same
#    rows;
#  - amqfilter columns in a distributed table keep their bytes;
#  - an amq index created on the distributed table reaches every shard and
#    shard plans use it;
#  - the join pre-filter runs inside the shards' plans and changes no result.
#
# Run by tools/test when Citus's source is present (tools/citus builds it);
# by hand: make installcheck-citus.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $nshards = 32;
my $nrows = 200_000;
my $nusers = 2_000;

# ---- the cluster ----
# citus must come first in shared_preload_libraries; bloomamq is preloaded
# too so that its planner hook (the join pre-filter) is in every backend,
# also those Citus opens on the workers.  Multi-shard writes use two-phase
# commit: prepared transactions are needed.
my @nodes;
for my $name (qw(coordinator worker1 worker2))
{
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'citus,bloomamq'
max_prepared_transactions = 100
autovacuum = off
jit = off
max_parallel_workers_per_gather = 0
});
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
	push @nodes, $node;
}
my ($coord, @workers) = @nodes;

# Nodes reach each other on their unix sockets: the host is the socket
# directory.
$coord->safe_psql('postgres',
	"SELECT citus_set_coordinator_host('" . $coord->host . "', " . $coord->port . ")");
for my $w (@workers)
{
	$coord->safe_psql('postgres',
		"SELECT citus_add_node('" . $w->host . "', " . $w->port . ")");
}
is($coord->safe_psql('postgres',
		"SELECT count(*) FROM citus_get_active_worker_nodes()"),
	'2', 'the coordinator sees two active workers');

# CREATE EXTENSION on the coordinator reaches the workers.
$coord->safe_psql('postgres', 'CREATE EXTENSION bloomamq');
my $version = $coord->safe_psql('postgres',
	"SELECT extversion FROM pg_extension WHERE extname = 'bloomamq'");
for my $w (@workers)
{
	is($w->safe_psql('postgres',
			"SELECT extversion FROM pg_extension WHERE extname = 'bloomamq'"),
		$version, $w->name . " has bloomamq $version from the coordinator");
}

# ---- the data ----
# events: ids 1..N, users 1..$nusers (the distribution column), 7
# categories, a text key.  small: 300 of the users.  The *_local tables
# hold the same rows as plain tables on the coordinator.
$coord->safe_psql('postgres', qq{
SET citus.shard_count = $nshards;
CREATE TABLE events_local (id int8, user_id int8, cat int, name text);
INSERT INTO events_local
SELECT g, 1 + (g * 7919) % $nusers, g % 7, 'n' || (g % 50000)
FROM generate_series(1, $nrows) g;
CREATE TABLE events (LIKE events_local);
SELECT create_distributed_table('events', 'user_id');
INSERT INTO events SELECT * FROM events_local;

CREATE TABLE small_local (user_id int8, label text);
INSERT INTO small_local SELECT u, 'u' || u FROM generate_series(1, $nusers, 7) u;
CREATE TABLE small (LIKE small_local);
SELECT create_distributed_table('small', 'user_id', colocate_with => 'events');
INSERT INTO small SELECT * FROM small_local;

ANALYZE events_local, small_local, events, small;
});
is($coord->safe_psql('postgres',
		"SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'events'::regclass"),
	$nshards, "events has $nshards shards");
is($coord->safe_psql('postgres', 'SELECT count(*), sum(id) FROM events'),
	$coord->safe_psql('postgres', 'SELECT count(*), sum(id) FROM events_local'),
	'events holds the rows of events_local');
# (Citus hides shards from catalog queries on the workers unless told not to)
my $show = 'SET citus.override_table_visibility = off;';
my @per_worker = map {
	$_->safe_psql('postgres',
		"$show SELECT count(*) FROM pg_class WHERE relname ~ '^events_[0-9]+\$' AND relkind = 'r'")
} @workers;
is(join(',', @per_worker), join(',', ($nshards / 2) x 2),
	'the shards are spread over both workers');

# ---- comparing a distributed query with the same query on local copies ----
# Runs $sql, then the same with events, small and fparts replaced by their
# local copies, and checks that both give the same lines, $want lines (or at
# least one if $want is undef), none of them empty or ending in a NULL.
# With $near, the last field of each line is a key count that may differ by
# 2% (see count_of below), the rest must be equal.
sub same_rows
{
	my ($sql, $want, $name, $near) = @_;
	(my $local = $sql) =~ s/\b(events|small|fparts)\b/$1_local/g;
	my @d = split /\n/, $coord->safe_psql('postgres', $sql);
	my @l = split /\n/, $coord->safe_psql('postgres', $local);
	my ($differ, $counts_off) = (0, 0);
	for my $i (0 .. ($#d > $#l ? $#d : $#l))
	{
		my ($dl, $ll) = ($d[$i] // '<none>', $l[$i] // '<none>');
		if ($near)
		{
			my ($dc, $lc);
			($dl, $dc) = $dl =~ /^(.*)\|(\d+)$/ ? ($1, $2) : ($dl, -1);
			($ll, $lc) = $ll =~ /^(.*)\|(\d+)$/ ? ($1, $2) : ($ll, -1);
			$counts_off++ if $dc < 0 || $lc <= 0 || abs($dc - $lc) > 0.02 * $lc;
		}
		$differ++ if $dl ne $ll;
	}
	my $empty = grep { $_ eq '' || /\|$/ || /\|\|/ } @d;
	my $rows = scalar @d;
	my $ok = $differ == 0 && $counts_off == 0 && $empty == 0
	  && (defined $want ? $rows == $want : $rows > 0);
	ok($ok, $name)
	  or diag("$rows rows (want " . ($want // '>0') . "), $differ differ, $counts_off counts off, "
		  . "$empty NULL; first distributed: " . ($d[0] // '') . "; first local: " . ($l[0] // ''));
	return;
}

# What one filter is: its length and the md5 of its bytes.
sub bytes_of { my ($e) = @_; return "octet_length(($e)::bytea) || ':' || md5(($e)::bytea)"; }

# What a filter is apart from its key count: the md5 of its payload (the
# bytes after the header) and of its description without the count and
# what derives from it; then the count.  With a capacity, bloom, blocked,
# twobit and counting fill one fixed-size filter: bloom, blocked and twobit
# count the adds that changed it, which depends on the rows' order (a key
# whose bits earlier keys set is not counted); partial filters combined on
# the coordinator, and amq_union_agg, give a count estimated from the
# payload.  The payload is the same whatever the order or split.
sub count_of
{
	my ($e) = @_;
	return "md5(substr(($e)::bytea, octet_length(($e)::bytea) - (amq_info($e)->>'payload_bytes')::int + 1))"
	  . " || ':' || md5((amq_info($e) - 'keys' - 'bits_per_key' - 'keys_estimated')::text)"
	  . " || '|' || amq_count($e)";
}

# ---- amq_agg: every kind, with options, grouped three ways ----
# A capacity goes with the grouping (a filter per group), and only with the
# kinds that take one.
my @kinds = qw(bloom blocked twobit counting cuckoo scalable xor fuse ribbon);
my @groupings = (
	[ 'no GROUP BY', '', '', 1, 250000 ],
	[ 'GROUP BY user_id (distribution column)', 'user_id, ', 'GROUP BY user_id ORDER BY user_id', $nusers, 500 ],
	[ 'GROUP BY cat (another column)', 'cat, ', 'GROUP BY cat ORDER BY cat', 7, 40000 ],
);
for my $g (@groupings)
{
	my ($gname, $gcol, $gby, $ngroups, $capacity) = @$g;
	my @calls = ('amq_agg(id)', 'amq_agg(id, 0.001)', 'amq_agg(name)',
		'amq_agg(user_id, 0.05, \'auto\')', 'amq_agg(name, 0.01, \'parquet\')');
	push @calls, map { "amq_agg(id, 0.01, '$_')" } @kinds;
	push @calls, map { "amq_agg(id, 0.02, '$_', $capacity)" } qw(cuckoo scalable);
	for my $call (@calls)
	{
		same_rows("SELECT $gcol" . bytes_of($call) . " FROM events $gby",
			$ngroups, "$call, $gname: same bytes as on a local table");
	}
	for my $call (map { "amq_agg(id, 0.02, '$_', $capacity)" } qw(bloom blocked twobit counting))
	{
		same_rows("SELECT $gcol" . count_of($call) . " FROM events $gby",
			$ngroups, "$call, $gname: same payload as on a local table, key count within 2%", 1);
	}
}

# ---- amq_union_agg over an amqfilter column of a distributed table ----
# fparts: per kind, one filter per (category, user_id % 10) of one geometry
# (a capacity), distributed by part; the union of a category's parts is its
# filter.
$coord->safe_psql('postgres', q{
CREATE TABLE fparts_local (kind text, cat int, part int, f amqfilter);
INSERT INTO fparts_local
SELECT k, cat, user_id % 10, amq_agg(id, 0.01, k, 60000)
FROM events_local, unnest(ARRAY['bloom', 'blocked', 'twobit', 'counting']) k
GROUP BY k, cat, user_id % 10;
CREATE TABLE fparts (LIKE fparts_local);
SELECT create_distributed_table('fparts', 'part', colocate_with => 'none');
INSERT INTO fparts SELECT * FROM fparts_local;
});
# amqfilter values in a distributed table: the same bytes went in and out,
# and they answer probes as the local ones do
same_rows('SELECT kind, cat, part, ' . bytes_of('f') . ' FROM fparts ORDER BY 1, 2, 3',
	280, 'amqfilter column of a distributed table: every filter keeps its bytes');
same_rows(q{SELECT kind, cat, part FROM fparts WHERE f @> 4242::int8 ORDER BY 1, 2, 3},
	undef, 'amqfilter column of a distributed table: f @> key finds the same rows');
is($coord->safe_psql('postgres', q{
SELECT count(*) FROM fparts d JOIN fparts_local l USING (kind, cat, part)
WHERE d.f::bytea <> l.f::bytea}), '0',
	'amqfilter column of a distributed table: compared with a local copy, no filter differs');
$coord->safe_psql('postgres', q{
UPDATE fparts SET f = amq_add(f, 999999999::int8) WHERE kind = 'bloom' AND part = 3;
UPDATE fparts_local SET f = amq_add(f, 999999999::int8) WHERE kind = 'bloom' AND part = 3;
});
same_rows('SELECT kind, cat, part, ' . bytes_of('f') . ' FROM fparts ORDER BY 1, 2, 3',
	280, 'amqfilter column of a distributed table: an UPDATE on the shards changes the same bytes');

for my $kind (qw(bloom blocked twobit counting))
{
	same_rows("SELECT " . count_of('amq_union_agg(f)') . " FROM fparts WHERE kind = '$kind'",
		1, "amq_union_agg, $kind, no GROUP BY: same payload as on a local table", 1);
	same_rows("SELECT part, " . count_of('amq_union_agg(f)')
		  . " FROM fparts WHERE kind = '$kind' GROUP BY part ORDER BY part",
		10, "amq_union_agg, $kind, GROUP BY part (distribution column): same payload as on a local table", 1);
	same_rows("SELECT cat, " . count_of('amq_union_agg(f)')
		  . " FROM fparts WHERE kind = '$kind' GROUP BY cat ORDER BY cat",
		7, "amq_union_agg, $kind, GROUP BY cat (another column): same payload as on a local table", 1);
}

# ---- partial aggregation on the workers ----
# Grouped by the distribution column, each group lives in one shard and
# the whole aggregate runs there.  Otherwise Citus splits an aggregate whose
# state type it can move: worker_partial_agg on the shards, coord_combine_agg
# on the coordinator; rows themselves must not be shipped.
sub plan_of
{
	my ($sql) = @_;
	return $coord->safe_psql('postgres', "EXPLAIN (VERBOSE, COSTS OFF) $sql");
}
like(plan_of('SELECT user_id, amq_agg(id) FROM events GROUP BY user_id'),
	qr/Task Count: $nshards.*amq_agg\(.*GROUP BY .*user_id/s,
	'amq_agg GROUP BY the distribution column runs whole on the shards');
for my $q (
	[ 'amq_agg', 'SELECT amq_agg(id) FROM events' ],
	[ 'amq_agg with options', q{SELECT amq_agg(id, 0.001, 'ribbon') FROM events} ],
	[ 'amq_agg GROUP BY another column', 'SELECT cat, amq_agg(id) FROM events GROUP BY cat' ],
	[ 'amq_union_agg', 'SELECT amq_union_agg(f) FROM fparts WHERE kind = \'blocked\'' ])
{
	my ($name, $sql) = @$q;
	my $plan = plan_of($sql);
	like($plan, qr/worker_partial_agg\([^\n]*amq_(union_)?agg/,
		"$name: partial aggregates on the workers (worker_partial_agg)");
	like($plan, qr/coord_combine_agg\(/,
		"$name: combined on the coordinator (coord_combine_agg)");
}

# ---- <@ filters from a subquery ----
# The subquery runs once (a distributed subplan); its filter goes to every
# shard with the query.
my $sub = 'SELECT amq_agg(user_id) FROM small';
like(plan_of("SELECT count(*) FROM events WHERE user_id <@ ($sub)"),
	qr/Distributed Subplan.*Task Count: $nshards.*<@/s,
	'a filter from a subquery is computed once and sent to every shard');
same_rows("SELECT id FROM events WHERE user_id <@ ($sub) ORDER BY id", undef,
	'user_id <@ (subquery): the same rows as on local tables');
same_rows("SELECT id FROM events WHERE id <@ (SELECT amq_agg(id * 13, 0.01, 'fuse') FROM small, generate_series(1, 50) g(id)) ORDER BY id",
	undef, 'id <@ (subquery over a non-distribution column, fuse): the same rows as on local tables');
same_rows("SELECT count(*) FROM events e JOIN small s USING (user_id) WHERE e.user_id <@ ($sub)",
	1, 'a co-located join pre-filtered by hand: the same count as on local tables');
# and a filter that is false for a user is false on every shard: no false
# negative through the cluster
is($coord->safe_psql('postgres', qq{
SELECT count(*) FROM events e WHERE e.user_id IN (SELECT user_id FROM small)
AND NOT e.user_id <@ ($sub)}), '0', 'no false negative through the cluster');

# ---- <@ filters from bind parameters ----
# PREPARE / EXECUTE with an amqfilter parameter, seven times: custom plans,
# then whatever plan the cache settles on.
my $filter = $coord->safe_psql('postgres', "SELECT amq_agg(user_id, 0.001) FROM small_local");
like($filter, qr/\S/, 'a filter as text for the parameter');
my $want = $coord->safe_psql('postgres',
	"SELECT count(*), sum(id) FROM events_local WHERE user_id <@ '$filter'::amqfilter");
my $execs = join("\n", map { "EXECUTE q('$filter');" } 1 .. 7);
my $got = $coord->safe_psql('postgres', qq{
PREPARE q(amqfilter) AS SELECT count(*), sum(id) FROM events WHERE user_id <@ \$1;
$execs
});
is($got, join("\n", ($want) x 7),
	'EXECUTE with an amqfilter parameter, 7 times: the rows of the local table each time');
$got = $coord->safe_psql('postgres', qq{
PREPARE q(amqfilter) AS SELECT count(*), sum(id) FROM events WHERE id <@ \$1;
$execs
});
my $want_id = $coord->safe_psql('postgres',
	"SELECT count(*), sum(id) FROM events_local WHERE id <@ '$filter'::amqfilter");
is($got, join("\n", ($want_id) x 7),
	'EXECUTE with an amqfilter parameter on a non-distribution column: the local rows each time');

# Forced generic plans: Citus cannot plan a multi-shard query with a
# parameter in a generic plan, whatever the parameter's type; the same
# error for an amqfilter as for a bigint.
my $generic = sub {
	my ($type, $where, $arg) = @_;
	my ($ret, $out, $err) = $coord->psql('postgres', qq{
SET plan_cache_mode = force_generic_plan;
PREPARE g($type) AS SELECT count(*) FROM events WHERE $where;
EXECUTE g($arg);
});
	return $err =~ /ERROR:\s+(.*)/ ? $1 : "no error ($out)";
};
my $generic_err = $generic->('amqfilter', 'id <@ $1', "'$filter'");
like($generic_err, qr/could not create distributed plan/,
	'forced generic plan with an amqfilter parameter: Citus refuses it');
is($generic->('bigint', 'id > $1', '5'), $generic_err,
	'forced generic plan with a bigint parameter: the same refusal (a Citus limitation)');

# ---- amq indexes on the shards ----
$coord->safe_psql('postgres',
	'CREATE INDEX events_id_amq ON events USING amq (id, name) WITH (pages_per_range = 4)');
my @idx = map {
	$_->safe_psql('postgres',
		"$show " . q{SELECT count(*) FROM pg_indexes WHERE indexname ~ '^events_id_amq_[0-9]+$'
		  AND indexdef ~ 'USING amq'})
} @workers;
is($idx[0] + $idx[1], $nshards, "CREATE INDEX ... USING amq reached all $nshards shards");
my $lookup = q{SELECT id, user_id FROM events WHERE id = ANY ('{5,77,4242,199999,300000}') ORDER BY id};
my $noseq = q{BEGIN;
SET LOCAL citus.propagate_set_commands = 'local';
SET LOCAL enable_seqscan = off;
SET LOCAL citus.explain_all_tasks = on;
};
my $plan = $coord->safe_psql('postgres', "$noseq EXPLAIN (COSTS OFF) $lookup; COMMIT;");
my $uses = () = $plan =~ /Bitmap Index Scan on events_id_amq_\d+/g;
is($uses, $nshards, "every shard's plan looks up through its amq index");
is($coord->safe_psql('postgres', "$noseq $lookup; COMMIT;"),
	$coord->safe_psql('postgres', $lookup =~ s/events/events_local/r),
	'lookups through the shards\' amq indexes find the local table\'s rows');
# the same, on a worker's own shard, without Citus in the way
my ($shard) = $workers[0]->safe_psql('postgres',
	"$show " . q{SELECT relname FROM pg_class WHERE relname ~ '^events_[0-9]+$' AND relkind = 'r' ORDER BY 1 LIMIT 1});
like($workers[0]->safe_psql('postgres',
		"SET enable_seqscan = off; EXPLAIN (COSTS OFF) SELECT * FROM $shard WHERE id = 42"),
	qr/Bitmap Index Scan on events_id_amq_\d+/, "a worker's shard $shard has a usable amq index");

# Citus's columnar tables take btree and hash indexes only: an amq index is
# refused; filters still work on them.
$coord->safe_psql('postgres', q{
CREATE EXTENSION citus_columnar;
CREATE TABLE events_col (LIKE events_local) USING columnar;
SELECT create_distributed_table('events_col', 'user_id', colocate_with => 'events');
INSERT INTO events_col SELECT * FROM events_local;
});
my ($ret, $out, $err) = $coord->psql('postgres',
	'CREATE INDEX events_col_amq ON events_col USING amq (id)');
like($err, qr/unsupported access method for the index on columnar table/,
	'an amq index on a columnar table is refused');
(my $sub_local = $sub) =~ s/small/small_local/;
is($coord->safe_psql('postgres', "SELECT count(*), sum(id) FROM events_col WHERE user_id <@ ($sub)"),
	$coord->safe_psql('postgres', "SELECT count(*), sum(id) FROM events_local WHERE user_id <@ ($sub_local)"),
	'a filter from a subquery on a columnar table: the rows of the local table');

# ---- the join pre-filter inside the shards' plans ----
# With the setting on, each shard's hash join builds a filter of its inner
# keys; with it off, none.  Set per transaction (SET LOCAL, propagated to
# the workers' connections), then for every node (ALTER SYSTEM).
my $join = q{SELECT e.cat, count(*), sum(e.id) FROM events e JOIN small s ON e.user_id = s.user_id
WHERE s.label <> 'u8' GROUP BY e.cat ORDER BY e.cat};
my $semi = q{SELECT count(*), sum(id) FROM events WHERE user_id IN (SELECT user_id FROM small WHERE label <> 'u8')};
my $repart = q{SELECT count(*), sum(e.id) FROM events e JOIN fparts p ON e.cat = p.part};
my $local = sub {
	my ($prefilter) = @_;
	return qq{BEGIN;
SET LOCAL citus.propagate_set_commands = 'local';
SET LOCAL bloomamq.join_prefilter = $prefilter;
SET LOCAL bloomamq.join_prefilter_min_rows = 100;
SET LOCAL enable_mergejoin = off;
SET LOCAL enable_nestloop = off;
SET LOCAL citus.enable_repartition_joins = on;
};
};
my $off = {};
for my $q ([ 'join', $join ], [ 'semi-join', $semi ], [ 'repartition join', $repart ])
{
	$off->{$q->[0]} = $coord->safe_psql('postgres', $local->('off') . "$q->[1]; COMMIT;");
}
$plan = $coord->safe_psql('postgres',
	$local->('on') . "SET LOCAL citus.explain_all_tasks = on;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) $join; COMMIT;");
my $prefilters = () = $plan =~ /Custom Scan \(AmqPrefilter\)/g;
is($prefilters, $nshards, "SET LOCAL: every shard's join plan has an AmqPrefilter");
like($plan, qr/Rows Removed by Prefilter: [1-9]/, 'SET LOCAL: the shards\' pre-filters remove rows');
$plan = $coord->safe_psql('postgres',
	$local->('off') . "EXPLAIN (COSTS OFF) $join; COMMIT;");
unlike($plan, qr/AmqPrefilter/, 'with the setting off, no pre-filter in the shards\' plans');
for my $q ([ 'join', $join ], [ 'semi-join', $semi ], [ 'repartition join', $repart ])
{
	like($off->{$q->[0]}, qr/^\d+\|[1-9]/m, "$q->[0]: rows without the pre-filter");
	is($coord->safe_psql('postgres', $local->('on') . "$q->[1]; COMMIT;"),
		$off->{$q->[0]}, "SET LOCAL: $q->[0] gives the same rows with the pre-filter as without");
}

# every node: ALTER SYSTEM and a reload, no SET in the session
for my $node (@nodes)
{
	$node->safe_psql('postgres', q{
ALTER SYSTEM SET bloomamq.join_prefilter = on;
ALTER SYSTEM SET bloomamq.join_prefilter_min_rows = 100;
ALTER SYSTEM SET enable_mergejoin = off;
ALTER SYSTEM SET enable_nestloop = off;
SELECT pg_reload_conf();
});
}
# connections Citus keeps open see the reload too, but to be sure: new ones
$coord->safe_psql('postgres', 'SELECT citus_check_cluster_node_health()');
$plan = $coord->safe_psql('postgres',
	"SET citus.explain_all_tasks = on; EXPLAIN (COSTS OFF) $semi");
$prefilters = () = $plan =~ /Custom Scan \(AmqPrefilter\)/g;
is($prefilters, $nshards, "set on every node: every shard's semi-join plan has an AmqPrefilter");
for my $q ([ 'join', $join ], [ 'semi-join', $semi ], [ 'repartition join', $repart ])
{
	is($coord->safe_psql('postgres', "SET citus.enable_repartition_joins = on; $q->[1]"),
		$off->{$q->[0]}, "set on every node: $q->[0] gives the same rows as without the pre-filter");
}

$_->stop for @nodes;
done_testing();
