# The share of its data a TAP test runs on: BLOOMAMQ_TEST_SCALE, a fraction
# (default 1).  tools/valgrind-check sets it for servers under memcheck,
# where everything runs 30 to 60 times slower.  A test shrinks its data with
# it, never what it asserts.
#
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use BloomamqScale;
#   my $nrows = scaled(20000, 2000);
package BloomamqScale;

use strict;
use warnings;
use Exporter 'import';

our @EXPORT = qw(scale scaled);

my $scale = $ENV{BLOOMAMQ_TEST_SCALE} || 1;

# the fraction itself
sub scale { return $scale; }

# scaled(N, MIN): N times the fraction, rounded down, and at least MIN
# (default 1)
sub scaled
{
	my ($n, $min) = @_;
	my $s = int($n * $scale);
	$min //= 1;
	return $s < $min ? $min : $s;
}

1;
