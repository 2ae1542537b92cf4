# amq_index_check() on damaged index files: a healthy amq index passes, also
# with heapallindexed; then, each in a twin index given a copy of the
# healthy file, the file is damaged on disk while the server is down (the
# metapage, a directory entry, a range record, the copy of a sealed filter's
# header, a segment's length, bytes of a sealed filter, a page's special
# space, a whole data page zeroed) and each damage is reported as an ERROR with
# SQLSTATE XX002 naming the block (and the range), never a crash: the server
# answers after each.  Two damages that leave the structure sound are
# caught only by heapallindexed: a growing range's segment bits zeroed (a
# segment has no valid checksum once inserts set its bits in place) and a
# range's directory entry emptied.  Then random damage to many indexes:
# every check passes or reports XX002.  Last, the check runs while inserts go on
# and reports nothing, also with VACUUM's reseals meanwhile.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use BloomamqScale;

my $node = PostgreSQL::Test::Cluster->new('main');
# pages are damaged behind the server's back: no data checksums (18 turns
# them on by default), and should they be on anyway, read on past them
$node->init(no_data_checksums => 1);
$node->append_conf('postgresql.conf', "autovacuum = off\nignore_checksum_failure = on");
$node->start;

# Sealed ranges, overflow segments in sealed ranges (rows inserted into the
# space deletes freed), and ranges that inserts opened past the build's end,
# which hold only dynamic segments.
$node->safe_psql('postgres', q{
CREATE EXTENSION bloomamq;
CREATE TABLE t (id int8, k text, pad text);
INSERT INTO t SELECT g, 'k' || g, repeat('p', 40) FROM generate_series(1, 5000) g;
CREATE INDEX t_amq ON t USING amq (id, k) WITH (pages_per_range = 4);
DELETE FROM t WHERE id % 5 = 0;
VACUUM t;
INSERT INTO t SELECT 100000 + g, 'k' || (100000 + g), 'x' FROM generate_series(1, 500) g;
INSERT INTO t SELECT 200000 + g, 'k' || (200000 + g), repeat('q', 40) FROM generate_series(1, 2000) g;
});

# For random damage: many indexes of another table, of several columns and
# pages_per_range, with sealed ranges, overflow and growing ranges.
# BLOOMAMQ_TEST_SCALE (BloomamqScale.pm; tools/valgrind-check sets it for
# servers under memcheck) damages fewer of them, at least 20, and makes
# the table of the last test, each of whose rows is looked up through the
# index at its end, smaller.
my $nrandom = scaled(60, 20);
my $nr = scaled(20000, 2000);
$node->safe_psql('postgres', q{
CREATE TABLE m (id int8, k text, pad text);
INSERT INTO m SELECT g, 'k' || g, repeat('p', 40) FROM generate_series(1, 3000) g;
} . join('', map {
	my @cols = ('id', 'id, k', 'k');
	sprintf("CREATE INDEX m%d ON m USING amq (%s) WITH (pages_per_range = %d);\n",
		$_, $cols[ $_ % 3 ], (1, 2, 4, 8)[ $_ % 4 ]);
} 0 .. $nrandom - 1) . q{
DELETE FROM m WHERE id % 5 = 0;
VACUUM m;
INSERT INTO m SELECT 100000 + g, 'k' || (100000 + g), 'x' FROM generate_series(1, 400) g;
INSERT INTO m SELECT 200000 + g, 'k' || (200000 + g), repeat('q', 40) FROM generate_series(1, 600) g;
});
my @random_files = map {
	$node->data_dir . '/' . $node->safe_psql('postgres', "SELECT pg_relation_filepath('m$_')")
} 0 .. $nrandom - 1;

sub check
{
	my ($heapallindexed, $index) = @_;
	my $arg = $heapallindexed ? ', heapallindexed => true' : '';
	$index //= 't_amq';
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT amq_index_check('$index'$arg);");
	return ($ret, $stderr);
}

my ($ret, $err) = check(0);
is($ret, 0, 'the healthy index passes') or diag($err);
($ret, $err) = check(1);
is($ret, 0, 'the healthy index passes with heapallindexed') or diag($err);

# The healthy file, read once a checkpoint has written it out (nothing
# changes it meanwhile: the server is idle, autovacuum off).
my $bs = $node->safe_psql('postgres', 'SHOW block_size');
my $file = $node->data_dir . '/' . $node->safe_psql('postgres', q{SELECT pg_relation_filepath('t_amq')});
$node->safe_psql('postgres', 'CHECKPOINT');

my $healthy = slurp_file($file);
my $nblocks = length($healthy) / $bs;
cmp_ok($nblocks, '>=', 4, "the index has $nblocks blocks");

# ---- the index's layout (amqidx.h): pages hold content between a 24-byte
# header and 8 bytes of special space; blobs are addressed by block and
# content offset and continue on the next block

my $START = 24;
my $CONTENT = $bs - $START - 8;

sub u16 { my ($b, $o) = @_; return unpack('v', substr($b, $o, 2)); }
sub u32 { my ($b, $o) = @_; return unpack('V', substr($b, $o, 4)); }
sub u64 { my ($b, $o) = @_; return unpack('Q<', substr($b, $o, 8)); }

# file offset of stream address (blk, off) + delta
sub at
{
	my ($blk, $off, $delta) = @_;
	my $pos = $off + ($delta // 0);
	$blk += int($pos / $CONTENT);
	return $blk * $bs + $START + $pos % $CONTENT;
}

# len bytes of the stream at (blk, off), across pages
sub stream_read
{
	my ($b, $blk, $off, $len) = @_;
	my $out = '';
	for (my $i = 0; $i < $len; $i++)
	{
		$out .= substr($b, at($blk, $off, $i), 1);
	}
	return $out;
}

sub stream_write
{
	my ($b, $blk, $off, $data) = @_;
	for (my $i = 0; $i < length($data); $i++)
	{
		substr($$b, at($blk, $off, $i), 1) = substr($data, $i, 1);
	}
}

my $meta = $START;
my $natts = u16($healthy, $meta + 12);
my $nranges = u32($healthy, $meta + 24);
my $ndirpages = u32($healthy, $meta + 28);
my @dirpages = map { u32($healthy, $meta + 56 + 4 * $_) } 0 .. $ndirpages - 1;
is($natts, 2, 'the metapage gives two key columns');

# the directory entry of a range: its file offset and its address
sub dir_entry
{
	my ($range) = @_;
	my $per = int($CONTENT / 8);
	my $o = $dirpages[ int($range / $per) ] * $bs + $START + 8 * ($range % $per);
	return ($o, u32($healthy, $o), u32($healthy, $o + 4));
}

# a range record: header, then per column the sealed filter's address,
# capacity, segment count and header copy (96 bytes), then the segments
sub record
{
	my ($range) = @_;
	my (undef, $blk, $off) = dir_entry($range);
	return undef if $blk == 0xFFFFFFFF;
	my $hdr = stream_read($healthy, $blk, $off, 8);
	my %r = (blk => $blk, off => $off, range => u32($hdr, 0), flags => u16($hdr, 6), cols => []);
	my $pos = 8 + 96 * $natts;
	for my $c (0 .. $natts - 1)
	{
		my $col = stream_read($healthy, $blk, $off + 8 + 96 * $c, 96);
		my %col = (sealed_blk => u32($col, 0), sealed_off => u32($col, 4),
			nsegs => u16($col, 12), coloff => 8 + 96 * $c, segs => []);
		for my $s (0 .. $col{nsegs} - 1)
		{
			my $seg = stream_read($healthy, $blk, $off + $pos, 12);
			push @{ $col{segs} }, { blk => u32($seg, 0), off => u32($seg, 4) };
			$pos += 12;
		}
		push @{ $r{cols} }, \%col;
	}
	return \%r;
}

my @records = map { record($_) } 0 .. $nranges - 1;
my ($sealed) = grep { defined $_ && $_->{cols}[0]{sealed_blk} != 0xFFFFFFFF } @records;
my ($overflow) = grep { defined $_ && ($_->{flags} & 1) && $_->{cols}[0]{nsegs} > 0 } @records;
my ($growing) = grep { defined $_ && !($_->{flags} & 1) && $_->{cols}[0]{nsegs} > 0 } reverse @records;
ok(defined $sealed && defined $overflow && defined $growing,
	'the index has a sealed range, a sealed range with overflow segments and a growing range');

# ---- damages, each in a twin of t_amq: an index of the same definition
# whose file is overwritten, while the server is down, with the healthy
# file's bytes, damaged.  All are written at once and checked after one
# start (under memcheck a start takes tens of seconds).

my @damages;
sub damage
{
	my ($what, $mutate, $detail, $heap_only) = @_;
	push @damages, { what => $what, mutate => $mutate, detail => $detail, heap_only => $heap_only };
}

damage('metapage magic', sub { substr(${ $_[0] }, $meta, 1) = "\xff"; },
	qr/the metapage's magic number is 0x51494DFF, not 0x51494D41/);

damage('metapage range count',
	sub { substr(${ $_[0] }, $meta + 24, 4) = pack('V', $ndirpages * int($CONTENT / 8) + 1); },
	qr/the metapage counts \d+ ranges, more than its \d+ directory pages hold/);

damage('directory entry past the end of the index',
	sub { my ($o) = dir_entry($sealed->{range}); substr(${ $_[0] }, $o, 4) = pack('V', $nblocks + 100); },
	qr/the range record is at block \d+, offset \d+, outside the index's \d+ blocks/);

damage("range record's range number",
	sub { stream_write($_[0], $sealed->{blk}, $sealed->{off}, pack('V', 77777)); },
	qr/the range record at offset \d+ is of range 77777/);

damage("range record's segment count",
	sub { stream_write($_[0], $overflow->{blk}, $overflow->{off} + $overflow->{cols}[0]{coloff} + 12, pack('v', 5000)); },
	qr/column 1 of the range record at offset \d+ has 5000 segments, more than 64/);

damage("the record's copy of a sealed filter's header",
	sub {
		# its key count (bytes 24..31 of the header)
		my $c = $sealed->{cols}[0];
		stream_write($_[0], $sealed->{blk}, $sealed->{off} + $c->{coloff} + 16 + 24, pack('Q<', 123456789));
	},
	qr/the sealed filter of column 1 at offset \d+ differs from the copy of its header in the range record/);

damage("a segment's payload length",
	sub {
		my $s = $overflow->{cols}[0]{segs}[0];
		my $len = u64(stream_read($healthy, $s->{blk}, $s->{off}, 80), 64);
		stream_write($_[0], $s->{blk}, $s->{off} + 64, pack('Q<', $len + $CONTENT * 1000));
	},
	qr/segment 1 of column 1 \(block \d+, offset \d+, \d+ bytes\) runs past the end of the index's \d+ blocks/);

# The free space, at the end of the metapage's content: the stream's run
# end, the number of runs, then 120 runs of (first block, pages).  Listed
# over a filter in use, a run would let the stream overwrite it.
my $fs = $meta + $CONTENT - (8 + 120 * 8);
sub free_runs { my @runs = @_; return pack('V', scalar(@runs) / 2) . pack('V*', @runs) . "\0" x (120 * 8 - 4 * @runs); }
damage('a free run over a filter in use',
	sub { substr(${ $_[0] }, $fs + 4, 4 + 120 * 8) = free_runs($sealed->{cols}[0]{sealed_blk}, 1); },
	qr/(a blob at offset \d+ \(\d+ bytes\) lies in the free space from block \d+, offset \d+|the free space at block \d+ overlaps the free space at block \d+)/);

damage('a free run outside the index',
	sub { substr(${ $_[0] }, $fs + 4, 4 + 120 * 8) = free_runs($nblocks + 3, 2); },
	qr/free run 0 \(block \d+, 2 pages\) is not inside the index's \d+ blocks/);

damage('bytes inside a sealed filter',
	sub {
		my $c = $sealed->{cols}[1];
		my $o = at($c->{sealed_blk}, $c->{sealed_off}, 80 + 7);
		substr(${ $_[0] }, $o, 1) = chr(ord(substr(${ $_[0] }, $o, 1)) ^ 0x5a);
	},
	qr/the sealed filter of column 2 at offset \d+ fails validation: filter checksum mismatch/);

damage("a data page's special-space page id",
	sub { substr(${ $_[0] }, $sealed->{cols}[0]{sealed_blk} * $bs + $bs - 2, 2) = pack('v', 0x1234); },
	qr/the special space's page id is 0x1234, not the amq index's 0xFA51/);

damage('a data page zeroed',
	sub { substr(${ $_[0] }, $sealed->{cols}[0]{sealed_blk} * $bs, $bs) = "\0" x $bs; },
	qr/.*(lies|ends) on block \d+, a new, all-zero page/);

# Caught by heapallindexed only.  The segments of column 1 of a range that
# inserts opened hold all its keys; with their bits zeroed they are still
# well-formed filters (a segment's checksum is stale by design), but the
# range's rows are no longer found: false negatives.
damage("a growing range's segment bits zeroed",
	sub {
		for my $s (@{ $growing->{cols}[0]{segs} })
		{
			my $len = u64(stream_read($healthy, $s->{blk}, $s->{off}, 80), 64);
			stream_write($_[0], $s->{blk}, $s->{off} + 80, "\0" x $len);
		}
	},
	qr/the key of heap tuple \(\d+,\d+\) in column 1 is in none of the range's \d+ filters/, 1);

# A range without a record is sound (its pages held no rows when the index
# was built), unless the heap has rows there.
damage("a range's directory entry emptied",
	sub { my ($o) = dir_entry($sealed->{range}); substr(${ $_[0] }, $o, 8) = pack('VV', 0xFFFFFFFF, 0); },
	qr/heap tuple \(\d+,\d+\) has a key, but the range has no record/, 1);

# the twins, built while the server is up, then the server down
$node->safe_psql('postgres', join('', map {
	"CREATE INDEX t_amq_d$_ ON t USING amq (id, k) WITH (pages_per_range = 4);\n"
} 0 .. $#damages) . "CHECKPOINT;\n");
my @twin_files = map {
	$node->data_dir . '/' . $node->safe_psql('postgres', "SELECT pg_relation_filepath('t_amq_d$_')")
} 0 .. $#damages;
$node->stop;

# Random damage, from a fixed seed: bits flipped, bytes and words
# overwritten, runs and pages zeroed, in every index of m.  Each check must
# pass (the damage hit bytes nothing uses, or only made a filter answer true
# more often) or fail with XX002, or XX001 where the buffer manager refuses a
# page header, or 0A000 for a metapage version above this build's (as a scan
# says: a later format, not known to be damage); never another error, never a
# crash.
my $seed = $ENV{CHECK_DAMAGE_SEED} // 20261124;
note "random damage seed $seed";
srand($seed);
for my $f (@random_files)
{
	my $b = slurp_file($f);
	my $n = length($b) / $bs;
	my $op = int(rand(6));
	if ($op == 0)
	{
		for (1 .. 1 + int(rand(3)))
		{
			my $o = int(rand(length($b)));
			substr($b, $o, 1) = chr(ord(substr($b, $o, 1)) ^ (1 << int(rand(8))));
		}
	}
	elsif ($op == 1)
	{
		my $blk = int(rand($n));
		substr($b, $blk * $bs + $START + int(rand($CONTENT)), 1) = chr(int(rand(256))) for 1 .. 50;
	}
	elsif ($op == 2)
	{
		my @v = (0, 0xFFFFFFFF, int(rand(2**32)), int(rand($n + 3)), int(rand(9000)));
		substr($b, int(rand($n)) * $bs + $START + 4 * int(rand($CONTENT / 4)), 4) =
		  pack('V', $v[ int(rand(@v)) ]);
	}
	elsif ($op == 3)
	{
		substr($b, int(rand(length($b) - 64)), 64) = "\0" x 64;
	}
	elsif ($op == 4)
	{
		substr($b, int(rand($n)) * $bs, $bs) = "\0" x $bs;
	}
	else
	{
		# the metapage's fields, or a page's special space
		my $o = int(rand(2)) ? $START + int(rand(64)) : int(rand($n)) * $bs + $bs - 8 + int(rand(8));
		substr($b, $o, 1) = chr(int(rand(256)));
	}
	open(my $fh, '>', $f) or die "open $f: $!";
	binmode $fh;
	print $fh $b;
	close $fh;
}

# the twins' files
for my $i (0 .. $#damages)
{
	my $bytes = $healthy;
	$damages[$i]{mutate}->(\$bytes);
	die "$damages[$i]{what}: the damage changed the file's size" if length($bytes) != length($healthy);
	open(my $fh, '>', $twin_files[$i]) or die "open $twin_files[$i]: $!";
	binmode $fh;
	print $fh $bytes;
	close $fh;
}
$node->start;

for my $i (0 .. $#damages)
{
	my ($what, $detail) = ($damages[$i]{what}, $damages[$i]{detail});
	my ($r, $e);
	if ($damages[$i]{heap_only})
	{
		# the structure is sound: only the heap's rows show the damage
		($r, $e) = check(0, "t_amq_d$i");
		is($r, 0, "$what: the structural check passes") or diag($e);
		($r, $e) = check(1, "t_amq_d$i");
	}
	else
	{
		($r, $e) = check(0, "t_amq_d$i");
	}
	isnt($r, 0, "$what: the check fails");
	like($e, qr/ERROR:  XX002: amq index "t_amq_d$i" is corrupted\nDETAIL:  Block \d+(, range \d+)?: $detail/,
		"$what: reported as index corruption (XX002)");
	note($e =~ /(DETAIL:  [^\n]*)/ ? $1 : $e);
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$what: the server is up");
}
$node->safe_psql('postgres', join('', map { "DROP INDEX t_amq_d$_;\n" } 0 .. $#damages));

my %outcomes;
my @unexpected;
for my $i (0 .. $nrandom - 1)
{
	for my $h ('false', 'true')
	{
		my ($r, $out, $e) = $node->psql('postgres',
			"\\set VERBOSITY verbose\nSELECT amq_index_check('m$i', $h);");
		my $state = $r == 0 ? 'passed' : $e =~ /ERROR:  ([0-9A-Z]{5}):/ ? $1 : "psql exit $r";
		$outcomes{$state}++;
		push @unexpected, "m$i, heapallindexed $h: $e"
		  unless $state =~ /^(passed|XX002|XX001)$/
		  || ($state eq '0A000' && $e =~ /has version \d+, this bloomamq reads version 1/);
	}
}
note join(', ', map { "$outcomes{$_} $_" } sort keys %outcomes);
is(join("\n", @unexpected), '', 'random damage: every check passes or reports XX002 (or XX001, or 0A000 for a later version)');
cmp_ok($outcomes{XX002} // 0, '>', $nrandom / 2, 'random damage: most damage is reported');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'random damage: the server is up');
$node->safe_psql('postgres', 'DROP TABLE m');

# t_amq itself, never damaged, still passes
($ret, $err) = check(1);
is($ret, 0, 'the healthy index still passes') or diag($err);

# While inserts go on (many into sealed ranges, as deletes freed space in
# old pages), the check, both ways, finds nothing: it reads a consistent copy
# of the directory, and every row its snapshot sees is in the index.
$node->safe_psql('postgres', q{
CREATE SEQUENCE s START 1000001;
DELETE FROM t WHERE id % 3 = 0;
VACUUM t;
});
$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --time=8',
	0,
	[qr{processed: [1-9]}],
	[qr{^$}],
	'amq_index_check during inserts',
	{
		'insert@3' => q{
INSERT INTO t SELECT v, 'k' || v, 'i' FROM (SELECT nextval('s') AS v FROM generate_series(1, 5)) n;
},
		'check@2' => q{
SELECT amq_index_check('t_amq', heapallindexed => true);
SELECT amq_index_check('t_amq');
},
	});
($ret, $err) = check(1);
is($ret, 0, 'the index passes after the concurrent inserts') or diag($err);

# With VACUUM resealing meanwhile, heapallindexed finds no row the index
# loses.  An insert adds nothing when a filter of its range already answers
# true for the key (a false positive: at fpr 0.5, one new key in two); a
# reseal replaces those filters with ones built from a heap scan that may
# have passed the new row's page, so while a reseal runs, inserts add every
# key to the segment that survives it.  Before that rule this lost rows
# within seconds.
$node->safe_psql('postgres', qq{
CREATE SEQUENCE rs START 1000001;
CREATE TABLE r (id int8, pad text);
INSERT INTO r SELECT g, repeat('p', 40) FROM generate_series(1, $nr) g;
CREATE INDEX r_amq ON r USING amq (id) WITH (pages_per_range = 4, fpr = 0.5);
DELETE FROM r WHERE id % 3 = 0;
VACUUM r;
});
$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --time=8',
	0,
	[qr{processed: [1-9]}],
	[qr{^$}],
	'amq_index_check during inserts and reseals',
	{
		'insert_r@3' => q{
INSERT INTO r SELECT nextval('rs'), 'i' FROM generate_series(1, 5);
},
		'check_r@2' => q{
SELECT amq_index_check('r_amq', heapallindexed => true);
},
		'vacuum@1' => q{
VACUUM r;
},
	});
(my $r_ret, my $r_out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT amq_index_check('r_amq', heapallindexed => true);");
is($r_ret, 0, 'no row lost to inserts during reseals') or diag($err);
is($node->safe_psql('postgres', q{
SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off;
SELECT count(*) FROM (SELECT id FROM r OFFSET 0) x
WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.id = x.id)}), '0',
	'every row is found through the index after inserts during reseals');

unlike(slurp_file($node->logfile), qr/terminated by signal|server process .* was terminated/,
	'no server process crashed');
$node->stop;
done_testing();
