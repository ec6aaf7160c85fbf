/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl clear: lifts a quarantine through the control socket's "clear
 * PATH": the daemon forgets the verdict held for PATH and makes the kernel
 * forget its entry. The request itself is the one verdicts sends
 * (kc_path_cmd_run() in cmd-verdicts.c); this file is the usage and how the
 * answer is printed.
 */
#include <stdio.h>

#include "kc.h"

static const char kc_clear_usage[] =
	"usage: kvfsctl clear [--json] MOUNTPOINT|DATADIR PATH\n"
	"\n"
	"Lifts a quarantine: forgets the verdict held for PATH and makes the\n"
	"kernel forget its cached entry, so the next lookup asks the index\n"
	"again. The data of a quarantined block was kept; if it is still bad,\n"
	"the next failed read quarantines it again. PATH as for verdicts.\n"
	"\n"
	"  --json      print the daemon's JSON answer\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 success (also when there was nothing to clear), 2\n"
	"usage or operational error.\n";

static void kc_clear_text(const struct ctlproto_json *resp)
{
	if (ctlproto_json_true(resp, "changed"))
		printf("cleared the verdict of %s (was: %s%s); the next lookup "
		       "asks the index\n",
		       kc_str(resp, "path"), kc_str(resp, "verdict.result"),
		       ctlproto_json_true(resp, "verdict.quarantined")
			       ? ", quarantined"
			       : "");
	else
		printf("%s: no resolved verdict held, nothing to clear (the "
		       "kernel's cached entry was dropped anyway)\n",
		       kc_str(resp, "path"));
}

int kc_clear(int argc, char **argv)
{
	static const struct kc_path_cmd pc = {
		.name = "clear",
		.usage = kc_clear_usage,
		.args = "MOUNTPOINT|DATADIR PATH",
		.min_args = 2,
		.req = CTLPROTO_CLEAR,
		.text = kc_clear_text,
	};

	return kc_path_cmd_run(&pc, argc, argv);
}
