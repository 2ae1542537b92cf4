# Logical replication into a table with an amq index: the subscriber's apply
# worker inserts through the index's batches, which must be written before
# each applied transaction commits (or, with two_phase, is prepared).  After
# the initial copy, small transactions, one large transaction (streamed from
# 14 on), a prepared one (from 15), updates of the keys and deletes, rows
# of the subscriber are found through its index, the check with
# heapallindexed passes, and the replicated filters are the publisher's
# bytes; again after a VACUUM on the subscriber.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use BloomamqScale;

# BLOOMAMQ_TEST_SCALE (BloomamqScale.pm; tools/valgrind-check sets it for
# servers under memcheck) shrinks the rows, not what is asserted.
my $nrows = scaled(20000, 2000);
my $nbig = scaled(30000, 3000);

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$pub->append_conf('postgresql.conf', qq{
max_prepared_transactions = 5
logical_decoding_work_mem = '64kB'
});
$pub->start;
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$sub->append_conf('postgresql.conf', 'max_prepared_transactions = 5');
$sub->start;
my $version = $sub->safe_psql('postgres', 'SHOW server_version_num');

my $schema = q{
CREATE EXTENSION bloomamq;
CREATE TABLE t (pk int8 PRIMARY KEY, id int8, k text, f amqfilter);
};
$pub->safe_psql('postgres', $schema . qq{
INSERT INTO t SELECT g, g, 'k' || g, amq_from_array(ARRAY[g, g + 1]::int8[], 0.01, 'blocked')
FROM generate_series(1, $nrows) g;
CREATE PUBLICATION p FOR TABLE t;
});
$sub->safe_psql('postgres', $schema . q{
CREATE INDEX t_amq ON t USING amq (id, k) WITH (pages_per_range = 4);
});

my @options = ('copy_data = true');
push @options, 'streaming = on' if $version >= 140000;
push @options, 'two_phase = true' if $version >= 150000;
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION s CONNECTION '$connstr' PUBLICATION p WITH (" . join(', ', @options) . ')');
$sub->wait_for_subscription_sync($pub, 's');

# A seventh of the subscriber's rows, each by its keys alone through the
# index (a nested loop probing it once per row; the primary key, which
# logical replication needs, is another column); the check with
# heapallindexed, which probes every row; the same rows and filter bytes as
# on the publisher.
sub compare
{
	my ($what) = @_;
	my $sample = 'o.pk % 7 = 0';
	my $q = qq{SELECT count(*) FROM t o WHERE $sample AND EXISTS (SELECT FROM t i WHERE i.id = o.id AND i.k = o.k)};
	my $digest = q{SELECT md5(string_agg(pk || ':' || id || ':' || k || ':' || coalesce(md5(f::bytea), '-'), ',' ORDER BY pk)) FROM t};
	# one session on each node: a connection is slow under memcheck
	my @sub = split /\n/, $sub->safe_psql('postgres', qq{
SET enable_seqscan = off; SET enable_hashjoin = off;
SET enable_mergejoin = off; SET enable_material = off;
EXPLAIN (COSTS OFF) $q;
$q;
SELECT amq_index_check('t_amq', true);
SELECT 'checked';
$digest;
});
	my ($count, $checked, $sub_digest) = @sub[-4, -2, -1];
	my $plan = join("\n", @sub[0 .. $#sub - 4]);
	my ($want, $pub_digest) = split /\n/,
	  $pub->safe_psql('postgres', "SELECT count(*) FROM t o WHERE $sample; $digest");
	like($plan, qr/Nested Loop.*Bitmap Index Scan on t_amq/s,
		"$what: each row is looked up alone through the index");
	is($count, $want, "$what: each of $want rows (a seventh) found through the index");
	is($checked, 'checked', "$what: amq_index_check with heapallindexed passes");
	is($sub_digest, $pub_digest, "$what: the subscriber has the publisher's rows and filter bytes");
}

compare('after the initial copy');

# small transactions, then one large enough to stream (64 kB of decoding
# memory), updates of both keys, deletes
# (one session, each statement its own transaction)
$pub->safe_psql('postgres', join('', map { "INSERT INTO t VALUES (" . (1000000 + $_) . ', ' . (1000000 + $_) . ", 'small $_', NULL);\n" } 1 .. 20));
$pub->safe_psql('postgres', qq{
BEGIN;
INSERT INTO t SELECT 2000000 + g, 2000000 + g, 'big ' || g, amq_from_array(ARRAY[g]::int8[]) FROM generate_series(1, $nbig) g;
UPDATE t SET k = k || ' changed' WHERE id % 11 = 0;
UPDATE t SET id = id + 5000000 WHERE id % 13 = 0;
UPDATE t SET pk = -pk WHERE pk % 19 = 0;
DELETE FROM t WHERE id % 17 = 0;
COMMIT;
});
$pub->wait_for_catchup('s');
compare('after small transactions, a large one, updates and deletes');

if ($version >= 150000)
{
	$pub->safe_psql('postgres', q{
BEGIN;
INSERT INTO t SELECT 3000000 + g, 3000000 + g, 'prepared ' || g, NULL FROM generate_series(1, 500) g;
PREPARE TRANSACTION 'p1';
});
	$pub->wait_for_catchup('s');
	is($sub->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'pg_gid_%'}),
		'1', 'the subscriber prepared the transaction');
	$pub->safe_psql('postgres', "COMMIT PREPARED 'p1'");
	$pub->wait_for_catchup('s');
	compare('after a prepared transaction is committed');
}

$sub->safe_psql('postgres', 'VACUUM t');
compare('after a VACUUM on the subscriber');

$sub->stop;
$pub->stop;
done_testing();
