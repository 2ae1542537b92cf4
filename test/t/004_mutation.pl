# Hostile bytes through SQL: valid filters of every kind and a few sizes are
# mutated thousands of times (bits flipped, bytes truncated, extended and
# spliced, base64 text garbled), then fed to every input path -- the bytea
# cast, text input and binary input (COPY FORMAT binary, the type's recv) --
# and probed if accepted.  Every mutation must be rejected with an ERROR and
# a SQLSTATE, and the server must stay up.  The mutations come from a
# deterministic PRNG whose seed is printed (MUTATION_SEED=n to choose it).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use BloomamqScale;

my $seed = $ENV{MUTATION_SEED} // 20240611;
# BLOOMAMQ_TEST_SCALE (BloomamqScale.pm; tools/valgrind-check sets it for
# servers under memcheck) makes fewer mutations of each filter
my $per_base = $ENV{MUTATION_PER_BASE} // scaled(160, 16);
note "mutation seed $seed, $per_base mutations per filter";

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->start;

my $tmp = PostgreSQL::Test::Utils::tempdir;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION bloomamq;

-- valid filters: every kind, empty, tiny and larger, two key families
CREATE TABLE base (id serial PRIMARY KEY, what text, f bytea);
INSERT INTO base (what, f)
SELECT format('%s, %s keys (%s)', k, n, fam),
	CASE fam WHEN 'int' THEN (SELECT amq_agg(i, 0.01, k) FROM generate_series(1, n) i)
			 ELSE (SELECT amq_agg('key' || i, 0.01, k) FROM generate_series(1, n) i) END::bytea
FROM unnest(ARRAY['bloom', 'blocked', 'twobit', 'counting', 'cuckoo', 'scalable',
				  'xor', 'fuse', 'ribbon', 'parquet']) k,
	(VALUES (1), (100), (3000)) s(n), (VALUES ('int'), ('text')) fa(fam)
WHERE fam = 'int' OR n = 100;
INSERT INTO base (what, f)
SELECT format('%s, empty', k), amq_new(k, 10)::bytea
FROM unnest(ARRAY['bloom', 'blocked', 'twobit', 'counting', 'cuckoo', 'scalable', 'parquet']) k;
INSERT INTO base (what, f) VALUES
	('scalable grown into stages', amq_add(amq_new('scalable', 16), ARRAY(SELECT generate_series(1, 2000)))::bytea),
	('cuckoo with removals', amq_remove(amq_from_array(ARRAY(SELECT generate_series(1, 500)), 0.001, 'cuckoo'), ARRAY[1, 2, 3])::bytea),
	('blocked, 1e-6', (SELECT amq_agg(i, 0.000001, 'blocked') FROM generate_series(1, 500) i)::bytea);

-- mutations to apply: op, position, length, bytes
CREATE TABLE mutation (id int PRIMARY KEY, base int, op text, pos int, len int, data bytea);
CREATE TABLE recv_target (f amqfilter);

-- Apply one mutation; NULL when it leaves the bytes of a valid filter.
CREATE FUNCTION mutate(b bytea, m mutation) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
	r bytea;
BEGIN
	r := CASE m.op
		WHEN 'flip' THEN set_bit(b, m.pos, 1 - get_bit(b, m.pos))
		WHEN 'flip_byte' THEN set_byte(b, m.pos, m.len)
		WHEN 'truncate' THEN substring(b FROM 1 FOR m.len)
		WHEN 'extend' THEN b || m.data
		WHEN 'splice' THEN overlay(b PLACING m.data FROM m.pos + 1 FOR m.len)
		WHEN 'splice_self' THEN overlay(b PLACING substring(b FROM m.len + 1 FOR length(m.data))
										 FROM m.pos + 1 FOR length(m.data))
	END;
	IF r = b OR EXISTS (SELECT FROM base WHERE f = r) THEN
		RETURN NULL;
	END IF;
	RETURN r;
END $$;

-- Try one input path; the SQLSTATE of its error, or 'accepted' after
-- probing what it accepted.
CREATE FUNCTION try_input(path text, b bytea, txt text, file text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	f amqfilter;
BEGIN
	BEGIN
		IF path = 'bytea' THEN
			f := b::amqfilter;
		ELSIF path = 'text' THEN
			f := txt::amqfilter;
		ELSE
			-- binary COPY carries a bytea's bytes exactly as an amqfilter's
			EXECUTE format('COPY (SELECT %L::bytea) TO %L (FORMAT binary)', b, file);
			EXECUTE format('COPY recv_target FROM %L (FORMAT binary)', file);
			SELECT r.f INTO f FROM recv_target r;
			TRUNCATE recv_target;
		END IF;
	EXCEPTION WHEN OTHERS THEN
		RETURN SQLSTATE;
	END;
	-- accepted (a failure of the test): probe it, which must not crash;
	-- a key of another family is an error of its own
	BEGIN
		PERFORM f @> 1, amq_info(f), amq_count(f), amq_fpr(f);
	EXCEPTION WHEN OTHERS THEN
		NULL;
	END;
	BEGIN
		PERFORM f @> 'key1'::text;
	EXCEPTION WHEN OTHERS THEN
		NULL;
	END;
	RETURN 'accepted';
END $$;

-- Run the mutations of ids lo..hi through every path: one row per
-- (path, outcome) with its count; skipped are mutations that changed nothing.
CREATE FUNCTION run_batch(lo int, hi int, file text, OUT path text, OUT outcome text, OUT n bigint)
RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE
	m mutation;
	b bytea;
	mb bytea;
	txt text;
	res text[] := '{}';
BEGIN
	FOR m IN SELECT * FROM mutation WHERE id BETWEEN lo AND hi ORDER BY id LOOP
		SELECT f INTO b FROM base WHERE id = m.base;
		IF m.op = 'text' THEN
			-- garble one character of the base64 text form
			txt := overlay(translate(encode(b, 'base64'), E'\n', '') PLACING convert_from(m.data, 'SQL_ASCII')
						   FROM m.pos + 1 FOR m.len);
			IF txt = translate(encode(b, 'base64'), E'\n', '') THEN
				res := res || 'text:skipped'::text;
				CONTINUE;
			END IF;
			res := res || ('text:' || try_input('text', NULL, txt, file));
			CONTINUE;
		END IF;
		mb := mutate(b, m);
		IF mb IS NULL THEN
			res := res || 'all:skipped'::text;
			CONTINUE;
		END IF;
		res := res || ('bytea:' || try_input('bytea', mb, NULL, file));
		res := res || ('text:' || try_input('text', NULL, translate(encode(mb, 'base64'), E'\n', ''), file));
		res := res || ('recv:' || try_input('recv', mb, NULL, file));
	END LOOP;
	RETURN QUERY SELECT split_part(r, ':', 1), split_part(r, ':', 2), count(*)
		FROM unnest(res) r GROUP BY 1, 2;
END $$;
});

my @bases = map { [ split /\|/ ] }
  split /\n/, $node->safe_psql('postgres', 'SELECT id, length(f) FROM base ORDER BY id');
my $nbases = scalar @bases;
note "$nbases valid filters to mutate";
cmp_ok($nbases, '>=', 30, 'filters of every kind and several sizes to mutate');

# xorshift32: the same mutations on every platform for one seed
my $x = ($seed & 0xffffffff) || 1;
sub rnd
{
	my ($n) = @_;
	$x ^= ($x << 13) & 0xffffffff;
	$x ^= $x >> 17;
	$x ^= ($x << 5) & 0xffffffff;
	return $x % $n;
}
sub rnd_bytes
{
	my ($n) = @_;
	return join '', map { sprintf '%02x', rnd(256) } 1 .. $n;
}

# header fields are where structure is checked: aim a third of the byte
# changes at the 80-byte header
my @b64 = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '+', '/', '=', ' ', '*', "\\\\n", '-', '_');
my $rows = '';
my $id = 0;
for my $b (@bases)
{
	my ($base, $len) = @$b;
	my $b64len = int(($len + 2) / 3) * 4;
	for (1 .. $per_base)
	{
		my $k = rnd(8);
		my ($op, $pos, $l, $data) = ('', 0, 0, '');
		if ($k == 0)
		{
			($op, $pos) = ('flip', rnd($len * 8));
		}
		elsif ($k == 1)
		{
			($op, $pos, $l) = ('flip_byte', rnd(3) == 0 ? rnd($len) : rnd(80 < $len ? 80 : $len), rnd(256));
		}
		elsif ($k == 2)
		{
			($op, $l) = ('truncate', rnd(2) ? rnd($len) : rnd(81 < $len ? 81 : $len));
		}
		elsif ($k == 3)
		{
			($op, $data) = ('extend', rnd_bytes(1 + rnd(rnd(2) ? 8 : 64)));
		}
		elsif ($k == 4 || $k == 5)
		{
			# replace, insert or delete a span
			($op, $pos, $l) = ('splice', rnd($len), rnd(4) == 0 ? 0 : 1 + rnd(16));
			$data = rnd_bytes(rnd(4) == 0 ? 0 : 1 + rnd(16));
		}
		elsif ($k == 6)
		{
			# copy a span of the filter over another
			my $n = 1 + rnd(16);
			($op, $pos, $l, $data) = ('splice_self', rnd($len), rnd($len), '00' x $n);
		}
		else
		{
			my $c = $b64[ rnd(scalar @b64) ];
			$c = "\n" if $c eq "\\\\n";
			($op, $pos, $l, $data) = ('text', rnd($b64len), rnd(8) == 0 ? 2 : 1, unpack('H*', $c));
		}
		$id++;
		$rows .= join("\t", $id, $base, $op, $pos, $l, "\\\\x$data") . "\n";
	}
}
open(my $fh, '>', "$tmp/mutations.tsv") or die $!;
print $fh $rows;
close $fh;
$node->safe_psql('postgres', "COPY mutation FROM '$tmp/mutations.tsv'");
is($node->safe_psql('postgres', 'SELECT count(*) FROM mutation'), $id, "$id mutations loaded");

# in batches, one round trip each
my %count;
my $batch = 1000;
for (my $lo = 1; $lo <= $id; $lo += $batch)
{
	my $hi = $lo + $batch - 1;
	my $out = $node->safe_psql('postgres',
		"SELECT path, outcome, n FROM run_batch($lo, $hi, '$tmp/recv.bin')");
	for my $line (split /\n/, $out)
	{
		my ($path, $outcome, $n) = split /\|/, $line;
		$count{$path}{$outcome} += $n;
	}
}

my ($tried, $accepted, $skipped) = (0, 0, 0);
my %states;
for my $path (sort keys %count)
{
	for my $outcome (sort keys %{ $count{$path} })
	{
		my $n = $count{$path}{$outcome};
		note sprintf '%-6s %-9s %6d', $path, $outcome, $n;
		if ($outcome eq 'skipped') { $skipped += $n; next; }
		$tried += $n;
		if ($outcome eq 'accepted') { $accepted += $n; next; }
		$states{$outcome} += $n;
	}
}
note "seed $seed: $tried mutated inputs tried ($skipped mutations left the bytes unchanged), $accepted accepted";
note 'SQLSTATEs seen: ' . join(', ', map { "$_ ($states{$_})" } sort keys %states);

# 160 mutations of each filter try thousands of inputs (fewer under a scale)
my $min_tried = int(10000 * $per_base / 160);
cmp_ok($tried, '>=', $min_tried, "at least $min_tried mutated inputs tried");
is($accepted, 0, 'no mutated filter was accepted');
for my $path (qw(bytea text recv))
{
	cmp_ok(scalar(grep { $_ ne 'accepted' && $_ ne 'skipped' } keys %{ $count{$path} || {} }),
		'>=', 1, "$path input rejected mutations with an SQLSTATE");
}
# each rejection is an error of the data's own classes, never an internal one
my @bad = grep { !/^(22P02|22P03|XX001|0A000)$/ } keys %states;
is("@bad", '', 'rejections are 22P02, 22P03, XX001 or 0A000');

# the server is still up and the originals still answer
is($node->safe_psql('postgres', 'SELECT count(*) FROM base WHERE f::amqfilter IS NOT NULL'),
	$nbases, 'server up; every original filter still valid');
unlike(slurp_file($node->logfile), qr/terminated by signal|server process .* was terminated/,
	'no backend crashed');

$node->stop;
done_testing();
