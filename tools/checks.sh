# Sourced by the check scripts whose output is plain lines (tools/shm-check,
# tools/upgrade-check): "check NAME t|f" prints "ok - NAME" or
# "not ok - NAME" and counts it; checks_end prints the closing line
# "N passed, N failed" that tools/test reads, and fails if a check did.
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
checks_end() {
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}
