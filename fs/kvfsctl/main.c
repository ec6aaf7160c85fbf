/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl: the operator's command for kvfs (kvfsctl(8)). This file is the
 * dispatch only: the table of commands (name, entry point, one line of
 * help), the top-level usage and --version. Each command lives in a file
 * of its own (kc.h says which), parses its own options, prints text by
 * default and one JSON document with --json, and returns an exit status
 * (KC_EXIT_*).
 */
#include <stdio.h>
#include <string.h>

#include "kc.h"
#include "log.h"

struct kc_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct kc_cmd kc_cmds[] = {
	{"status", kc_status, "capacity, use, blocks, memory, uptime"},
	{"stats", kc_stats, "counters and rates (--watch)"},
	{"fsck", kc_fsck, "check the index against the data files (offline)"},
	{"verdicts", kc_verdicts, "the lookup manager's view of a name"},
	{"clear", kc_clear, "lift a quarantine"},
	{"evict", kc_evict, "evict least-recently-used blocks down to a size"},
	{"sync", kc_sync, "wait for the write-behind queue, make it durable"},
	{"gc", kc_gc, "compact mostly dead data files (offline)"},
};
#define KC_NCMDS (sizeof(kc_cmds) / sizeof(kc_cmds[0]))

static void kc_usage(FILE *f)
{
	fprintf(f, "usage: kvfsctl COMMAND [options] ARGS...\n"
		   "       kvfsctl COMMAND --help\n"
		   "       kvfsctl --version\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < KC_NCMDS; i++)
		fprintf(f, "  %-9s %s\n", kc_cmds[i].name, kc_cmds[i].summary);
	fprintf(f, "\nExit status: 0 success, 1 evict or gc did not finish "
		   "the job (see each\ncommand's --help), 2 usage or "
		   "operational error; fsck has e2fsck's\n(0, 1, 4, 8, 16: "
		   "kvfsctl fsck --help). See kvfsctl(8).\n");
}

int main(int argc, char **argv)
{
	/* Index messages only when something fails; we say what failed. */
	log_set_level(LOG_LVL_ERR);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		kc_err(NULL, "missing COMMAND");
		kc_usage(stderr);
		return KC_EXIT_ERROR;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		if (argc > 2 && strcmp(argv[1], "help") == 0) {
			char *h[] = {argv[2], (char *)"--help", NULL};

			for (size_t i = 0; i < KC_NCMDS; i++)
				if (strcmp(argv[2], kc_cmds[i].name) == 0)
					return kc_cmds[i].fn(2, h);
			kc_err(NULL, "unknown command '%s'", argv[2]);
			return KC_EXIT_ERROR;
		}
		kc_usage(stdout);
		return KC_EXIT_OK;
	}
	if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("kvfsctl %s\n", KVFS_VERSION);
		return KC_EXIT_OK;
	}
	for (size_t i = 0; i < KC_NCMDS; i++)
		if (strcmp(argv[1], kc_cmds[i].name) == 0)
			return kc_cmds[i].fn(argc - 1, argv + 1);
	kc_err(NULL, "unknown command '%s'; try 'kvfsctl --help'", argv[1]);
	return KC_EXIT_ERROR;
}
