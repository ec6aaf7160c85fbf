/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl evict: asks the running kvfs, over its control socket, to evict
 * least-recently-used blocks until its use is at or below a size, and
 * reports what it did. Only a running daemon evicts: the choice needs its
 * view of which blocks are open.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc.h"

static const char kc_evict_usage[] =
	"usage: kvfsctl evict [--json] --to SIZE MOUNTPOINT|DATADIR\n"
	"\n"
	"Asks the running kvfs to evict least-recently-used blocks until its\n"
	"use (the data files' physical size plus the index, as df shows it)\n"
	"is at or below SIZE, the way it does above its high watermark:\n"
	"blocks that are open are never evicted, each evicted name is gone\n"
	"from the mount at once, and its space is freed once the kernel lets\n"
	"go of it. SIZE is a byte count with an optional K, M, G or T suffix\n"
	"(powers of 1024, as for -o capacity), or N% of the capacity.\n"
	"\n"
	"  --to SIZE   the use to get down to (required)\n"
	"  --json      print the daemon's JSON answer\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 use is at or below SIZE, 1 it is not (what is left is\n"
	"open, or the index alone is larger), 2 usage or operational error\n"
	"(not mounted, bad SIZE, ...); nothing is evicted on exit status 2.\n";

/*
 * Parses an eviction target: "N" with an optional K/M/G/T suffix, or
 * "N%" (N up to 100). Writes the control-socket argument (a byte count or
 * "N%") into arg. -EINVAL for anything else, -ERANGE on overflow.
 */
static int kc_parse_target(const char *s, char *arg, size_t arg_len)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (end[0] == '%' && end[1] == '\0') {
		if (v > 100)
			return -ERANGE;
		snprintf(arg, arg_len, "%llu%%", v);
		return 0;
	}
	switch (*end) {
	case 'T':
	case 't':
		shift += 10;
		/* fall through */
	case 'G':
	case 'g':
		shift += 10;
		/* fall through */
	case 'M':
	case 'm':
		shift += 10;
		/* fall through */
	case 'K':
	case 'k':
		shift += 10;
		end++;
		break;
	default:
		break;
	}
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	snprintf(arg, arg_len, "%llu", v << shift);
	return 0;
}

/* evict's options; KC_BEGIN_HELP, -1 after an error, or optind. */
static int kc_evict_getopt(const char *cmd, int argc, char **argv,
			   const char **to, int *json)
{
	static const struct option opts[] = {
		{"to", required_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int help = 0, ch;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 't':
			*to = optarg;
			break;
		case 'j':
			*json = 1;
			break;
		case 'h':
			help = 1;
			break;
		default:
			return kc_opt_error(cmd, argv, ch);
		}
	}
	if (help) {
		fputs(kc_evict_usage, stdout);
		return KC_BEGIN_HELP;
	}
	return optind;
}

/*
 * Prints the daemon's answer to an eviction (raw with --json); returns the
 * exit status: KC_EXIT_DAMAGE when the target was not reached.
 */
static int kc_evict_report(const char *cmd, const struct kc_target *t,
			   const struct ctlproto_json *resp, const char *raw,
			   int json)
{
	uint64_t target = 0, before = 0, after = 0, n = 0, bytes = 0, cap = 0;
	char a[32], b[32], c[32], d[32];
	int ret;

	if (ctlproto_json_u64(resp, "target", &target) < 0 ||
	    ctlproto_json_u64(resp, "used_before", &before) < 0 ||
	    ctlproto_json_u64(resp, "used_after", &after) < 0 ||
	    ctlproto_json_u64(resp, "evicted", &n) < 0 ||
	    ctlproto_json_u64(resp, "evicted_bytes", &bytes) < 0) {
		kc_err(cmd, "%s/%s: the answer lacks the eviction's numbers",
		       t->datadir, CTLPROTO_SOCK_NAME);
		return KC_EXIT_ERROR;
	}
	ctlproto_json_u64(resp, "capacity", &cap);
	ret = ctlproto_json_true(resp, "reached") ? KC_EXIT_OK : KC_EXIT_DAMAGE;
	if (json) {
		fputs(raw, stdout);
		return ret;
	}
	printf("evicted %llu blocks (%s) from %s\n", (unsigned long long)n,
	       kc_size(a, sizeof(a), bytes),
	       t->mountpoint ? t->mountpoint : t->datadir);
	printf("use      %s -> %s (target %s, capacity %s)\n",
	       kc_size(a, sizeof(a), before), kc_size(b, sizeof(b), after),
	       kc_size(c, sizeof(c), target), kc_size(d, sizeof(d), cap));
	if (ret != KC_EXIT_OK)
		printf("target not reached: the blocks left are open, or the "
		       "index alone takes more\n");
	return ret;
}

int kc_evict(int argc, char **argv)
{
	const char *cmd = "evict", *to = NULL;
	char arg[32], *raw = NULL;
	int json = 0, i, rc, ret = KC_EXIT_ERROR;
	struct ctlproto_json resp;
	struct kc_target t;

	i = kc_evict_getopt(cmd, argc, argv, &to, &json);
	if (i < 0)
		return i == KC_BEGIN_HELP ? KC_EXIT_OK : KC_EXIT_ERROR;
	if (!to) {
		kc_err(cmd, "missing --to SIZE; try 'kvfsctl %s --help'", cmd);
		return KC_EXIT_ERROR;
	}
	rc = kc_parse_target(to, arg, sizeof(arg));
	if (rc < 0) {
		kc_err(cmd, "bad SIZE '%s': %s", to,
		       rc == -ERANGE
			       ? "too large (a percentage is at most 100%)"
			       : "want a number of bytes with an optional K, "
				 "M, G or T suffix, or a percentage of the "
				 "capacity such as 50%");
		return KC_EXIT_ERROR;
	}
	if (kc_nargs(cmd, argc - i, 1, 1, "MOUNTPOINT|DATADIR") < 0 ||
	    kc_target_open(cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	if (!t.mounted) {
		kc_err(cmd,
		       "%s is not mounted: only a running kvfs evicts (kvfsctl "
		       "gc compacts an unmounted data directory)",
		       t.datadir);
		goto out_free;
	}
	rc = kc_request_wait(t.datadir, CTLPROTO_EVICT, arg, &resp, &raw,
			     CTLPROTO_EVICT_TIMEOUT_S);
	if (rc < 0) {
		kc_request_err(cmd, &t, rc);
		goto out_free;
	}
	if (rc == 1)
		kc_daemon_err(cmd, "evict", &resp);
	else
		ret = kc_evict_report(cmd, &t, &resp, raw, json);
	ctlproto_json_free(&resp);
out_free:
	free(raw);
	kc_target_free(&t);
	return ret;
}
