# Sourced by the check scripts whose output is plain lines (tools/shm-check,
# tools/upgrade-check): "check NAME t|f" prints "ok - NAME" or
# "not ok - NAME" and counts it; checks_end prints the closing line
# "N passed, N failed" that tools/test reads, and fails if a check did;
# "has TEXT STRING" tells whether TEXT holds STRING.
pass=0
fail=0
check() {
	local name=$1 ok=$2
	if [ "$ok" = t ]; then
		echo "ok - $name"
		pass=$((pass + 1))
	else
		echo "not ok - $name"
		fail=$((fail + 1))
	fi
}
# has TEXT STRING: whether TEXT (a plan, say) holds STRING.  Not
# 'echo "$TEXT" | grep -q': grep exits at the first match, and under
# pipefail an echo still writing (a line at a time) then fails the check.
has() {
	[[ $1 == *"$2"* ]]
}
checks_end() {
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}
