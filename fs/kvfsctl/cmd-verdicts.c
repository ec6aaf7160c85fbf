/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl verdicts: the lookup manager's view of one name (the control
 * socket's "verdict PATH") or its totals ("verdicts"). The same request
 * path serves kvfsctl clear (cmd-clear.c), which only differs in the
 * request it sends and how it prints the answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc.h"

static const char kc_verdicts_usage[] =
	"usage: kvfsctl verdicts [--json] MOUNTPOINT|DATADIR [PATH]\n"
	"\n"
	"The lookup manager's view of PATH: whether the index has the name,\n"
	"and the verdict held for it (phase, result, generation, quarantined,\n"
	"waiters), or, without PATH, its totals. PATH is relative to the\n"
	"mount's root; an absolute path below MOUNTPOINT works too. kvfsctl\n"
	"never looks PATH up through the mount, which would change the\n"
	"verdict.\n"
	"\n"
	"  --json      print the daemon's JSON answer\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 success, 2 usage or operational error (not mounted, a\n"
	"directory on the way to PATH does not exist, ...).\n";

static void kc_verdict_text(const struct ctlproto_json *r)
{
	uint64_t n, m;

	printf("path       %s (parent inode ", kc_str(r, "path"));
	if (ctlproto_json_u64(r, "parent", &n) == 0)
		printf("%llu", (unsigned long long)n);
	printf(", name \"%s\")\n", kc_str(r, "name"));
	if (ctlproto_json_true(r, "index.exists") &&
	    ctlproto_json_u64(r, "index.ino", &n) == 0 &&
	    ctlproto_json_u64(r, "index.size", &m) == 0)
		printf("index      exists: inode %llu, %llu bytes\n",
		       (unsigned long long)n, (unsigned long long)m);
	else
		printf("index      no such name\n");
	if (!ctlproto_json_get(r, "verdict.phase")) {
		printf("verdict    none held (the next lookup asks the "
		       "index)\n");
		return;
	}
	printf("verdict    %s, %s", kc_str(r, "verdict.phase"),
	       kc_str(r, "verdict.result"));
	if (ctlproto_json_true(r, "verdict.quarantined"))
		printf(", quarantined (data kept; lift with kvfsctl clear)");
	if (ctlproto_json_u64(r, "verdict.ino", &n) == 0 && n)
		printf(", inode %llu", (unsigned long long)n);
	printf("\n");
	if (ctlproto_json_u64(r, "verdict.generation", &n) == 0)
		printf("generation %llu\n", (unsigned long long)n);
	if (ctlproto_json_u64(r, "verdict.waiters", &n) == 0 &&
	    ctlproto_json_u64(r, "verdict.holders", &m) == 0)
		printf("waiters    %llu parked lookups, %llu request holders\n",
		       (unsigned long long)n, (unsigned long long)m);
}

static void kc_totals_text(const struct ctlproto_json *r)
{
#define U(k) (ctlproto_json_u64(r, k, &v) == 0 ? (unsigned long long)v : 0ull)
	uint64_t v;

	printf("verdicts      %llu held: %llu pending, %llu quarantined; "
	       "%llu lookups parked\n",
	       U("verdicts"), U("pending"), U("quarantined"), U("parked"));
	printf("answers       %llu hits, %llu misses, %llu coalesced, "
	       "%llu cancelled\n",
	       U("hits"), U("misses"), U("coalesced"), U("cancelled"));
	printf("probes        %llu batches for %llu names, %llu failed, "
	       "%llu stale results discarded\n",
	       U("probes"), U("batched_keys"), U("probe_errors"),
	       U("stale_discarded"));
	printf("changes       %llu namespace bumps, %llu marked misses\n",
	       U("bumps"), U("marked_misses"));
#undef U
}

int kc_path_cmd_run(const struct kc_path_cmd *pc, int argc, char **argv)
{
	const char *cmd = pc->name;
	struct ctlproto_json resp;
	struct kc_target t;
	struct kc_opts o;
	char *raw = NULL, *rel = NULL;
	int i, rc, ret = KC_EXIT_ERROR;

	i = kc_begin(cmd, argc, argv, 0, pc->usage, pc->min_args, 2, pc->args,
		     &o);
	if (i < 0)
		return i == KC_BEGIN_HELP ? KC_EXIT_OK : KC_EXIT_ERROR;
	if (argc - i == 2 && argv[i + 1][0] == '\0') {
		kc_err(cmd, "PATH is empty");
		return KC_EXIT_ERROR;
	}
	if (kc_target_open(cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	if (kc_need_mounted(cmd, &t) < 0)
		goto out_free;
	if (argc - i == 2) {
		rel = kc_mount_rel(&t, argv[i + 1]);
		if (!rel) {
			kc_err(cmd, "%s", strerror(ENOMEM));
			goto out_free;
		}
	}
	if (rel)
		rc = kc_request(t.datadir, pc->req, rel, &resp, &raw);
	else
		rc = kc_request(t.datadir, CTLPROTO_VERDICTS, NULL, &resp,
				&raw);
	if (rc == -EMSGSIZE) {
		kc_err(cmd, "PATH is too long");
		goto out_free;
	}
	if (rc < 0) {
		kc_request_err(cmd, &t, rc);
		goto out_free;
	}
	if (rc == 1) {
		kc_daemon_err(cmd, rel ? rel : "verdicts", &resp);
		ctlproto_json_free(&resp);
		goto out_free;
	}
	if (o.json)
		fputs(raw, stdout);
	else if (!rel)
		kc_totals_text(&resp);
	else
		pc->text(&resp);
	ctlproto_json_free(&resp);
	ret = KC_EXIT_OK;
out_free:
	free(raw);
	free(rel);
	kc_target_free(&t);
	return ret;
}

int kc_verdicts(int argc, char **argv)
{
	static const struct kc_path_cmd pc = {
		.name = "verdicts",
		.usage = kc_verdicts_usage,
		.args = "MOUNTPOINT|DATADIR [PATH]",
		.min_args = 1,
		.req = CTLPROTO_VERDICT,
		.text = kc_verdict_text,
	};

	return kc_path_cmd_run(&pc, argc, argv);
}
