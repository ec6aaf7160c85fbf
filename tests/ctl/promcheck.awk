# SPDX-License-Identifier: MIT
# Checks that a file is Prometheus text exposition format, as kvfs writes
# it (MOUNTPOINT/.kvfs/stats): every sample line is "name value"; its name
# matches [a-zA-Z_:][a-zA-Z0-9_:]*, appears once, and has a "# TYPE name
# counter|gauge|..." line before it; a counter's name ends in "_total"; the
# value is a number. "# HELP" lines, if any, name a metric too; blank lines
# and other comments are allowed. Prints one line per problem and exits 1 if
# there was any (or no sample at all), 0 otherwise.
#
# usage: awk -f promcheck.awk FILE
function bad(msg) {
	printf "%s:%d: %s: %s\n", FILENAME, FNR, msg, $0
	nbad++
}

BEGIN {
	name_re = "^[a-zA-Z_:][a-zA-Z0-9_:]*$"
	num_re = "^[-+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+)?$"
}

/^# TYPE / {
	if (NF != 4)
		bad("a TYPE line is \"# TYPE name type\"")
	else if ($3 !~ name_re)
		bad("bad metric name in TYPE")
	else if ($4 !~ /^(counter|gauge|histogram|summary|untyped)$/)
		bad("unknown metric type")
	else if ($3 in type)
		bad("second TYPE line for " $3)
	else
		type[$3] = $4
	next
}

/^# HELP / {
	if (NF < 3 || $3 !~ name_re)
		bad("bad metric name in HELP")
	next
}

/^#/ || /^[ \t]*$/ {
	next
}

{
	nsamples++
	if (NF != 2) {
		bad("a sample line is \"name value\"")
		next
	}
	if ($1 !~ name_re) {
		bad("bad metric name")
		next
	}
	if (!($1 in type))
		bad("no \"# TYPE\" line before the sample")
	else if (type[$1] == "counter" && $1 !~ /_total$/)
		bad("a counter's name must end in _total")
	if ($1 in seen)
		bad("second sample of " $1)
	seen[$1] = 1
	if ($2 !~ num_re && $2 !~ /^[-+]?(Inf|NaN)$/)
		bad("the value is not a number")
}

END {
	if (nsamples == 0) {
		printf "%s: no samples\n", FILENAME
		nbad++
	}
	exit nbad ? 1 : 0
}
