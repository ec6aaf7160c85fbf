/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl gc: the command line of offline compaction (the engine is
 * fs/kvdb/compact.h). Parses the options, refuses a mounted data
 * directory, opens it with kvdb_open() (kvfs.lock held for the whole run;
 * data files read-write; every index commit durable), runs compact_run()
 * and prints what it did as text or as one JSON object. Single-threaded.
 */
#include "kc.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compact.h"
#include "kvdb.h"
#include "log.h"
#include "offline.h"
#include "tbuf.h"

static const struct kc_offline gc_offline = {
	.cmd = "gc",
	.mounted_hint = ", or use kvfsctl evict on the mount",
	.lockers = "fsck or gc",
};

struct gc_opts {
	int json;
	int dry_run;
	unsigned threshold;
};

static const char gc_usage[] =
	"usage: kvfsctl gc [--threshold PERCENT] [--dry-run] [--json] DATADIR\n"
	"\n"
	"Compacts the data files of an unmounted data directory: each data\n"
	"file whose live records (those the index points at, and the name\n"
	"records a rebuild of the index needs) take less than PERCENT of its\n"
	"physical size gets its live records copied, byte for byte, to a new\n"
	"data file, and is removed. Dead name records and records no name\n"
	"points at go with it; a file with no live record is just removed.\n"
	"Every block stays readable if gc is killed at any point. Refuses to\n"
	"run while kvfs serves DATADIR.\n"
	"\n"
	"  --threshold PERCENT  compact files less than PERCENT live, 1 to\n"
	"                       100 (default 50)\n"
	"  --dry-run            say what would be done, change nothing\n"
	"  --json               print one JSON object instead of text\n"
	"  -h, --help           print this help\n"
	"\n"
	"Exit status: 0 success, 1 a data file was left alone because a live\n"
	"record in it is damaged (see kvfsctl fsck), 2 usage or operational\n"
	"error (DATADIR mounted, unreadable, no space, ...).\n";

static void gc_report_text(const char *datadir, const struct gc_opts *o,
			   const struct compact_result *g)
{
	char a[32], b[32], c[32];
	const char *verb = o->dry_run ? "would be " : "";

	printf("gc %s%s: %zu data files examined, threshold %u%% live\n",
	       datadir, o->dry_run ? " (dry run)" : "", g->nfiles,
	       o->threshold);
	for (size_t i = 0; i < g->nfiles; i++) {
		const struct compact_file *r = &g->files[i];
		unsigned pct =
			r->physical
				? (unsigned)(r->live_bytes * 100 / r->physical)
				: 0;

		if (r->action == COMPACT_SKIPPED) {
			printf("SKIPPED    %06u.kvd: %s; run kvfsctl fsck\n",
			       r->id, r->why);
			continue;
		}
		printf("%-10s %06u.kvd: %llu data + %llu name records live "
		       "(%s of %s, %u%%), %llu dead name records, %llu "
		       "unreferenced",
		       compact_action_name(r->action), r->id,
		       (unsigned long long)r->nlive,
		       (unsigned long long)r->nnames,
		       kc_size(a, sizeof(a), r->live_bytes),
		       kc_size(b, sizeof(b), r->physical), pct,
		       (unsigned long long)r->ndead_names,
		       (unsigned long long)r->nunref);
		if (r->out_id)
			printf(" -> %06u.kvd", r->out_id);
		printf("\n");
	}
	if (o->dry_run) {
		printf("nothing changed (dry run)\n");
		return;
	}
	printf("%scompacted %llu, removed %llu, skipped %llu data files; "
	       "copied %llu data and %llu name records (%s)\n",
	       verb, (unsigned long long)g->ncompacted,
	       (unsigned long long)g->nremoved, (unsigned long long)g->nskipped,
	       (unsigned long long)g->copied_recs,
	       (unsigned long long)g->copied_names,
	       kc_size(a, sizeof(a), g->copied_bytes));
	printf("dropped %llu dead name records and %llu unreferenced records; "
	       "freed %llu orphans\n",
	       (unsigned long long)g->dead_names,
	       (unsigned long long)g->unref_recs,
	       (unsigned long long)g->orphans);
	printf("physical %s in %llu data files -> %s in %llu data files "
	       "(%s reclaimed)\n",
	       kc_size(a, sizeof(a), g->before.physical),
	       (unsigned long long)g->before.nfiles,
	       kc_size(b, sizeof(b), g->after.physical),
	       (unsigned long long)g->after.nfiles,
	       kc_size(c, sizeof(c),
		       g->before.physical > g->after.physical
			       ? g->before.physical - g->after.physical
			       : 0));
}

static void gc_report_json(const char *datadir, const struct gc_opts *o,
			   const struct compact_result *g)
{
	printf("{\"datadir\": ");
	tbuf_json_fput(stdout, datadir);
	printf(", \"threshold\": %u, \"dry_run\": %s, \"files\": [",
	       o->threshold, o->dry_run ? "true" : "false");
	for (size_t i = 0; i < g->nfiles; i++) {
		const struct compact_file *r = &g->files[i];

		printf("%s{\"file\": \"%06u.kvd\", \"action\": \"%s\", "
		       "\"physical_bytes\": %llu, \"live_bytes\": %llu, "
		       "\"live_records\": %llu, \"live_name_records\": %llu, "
		       "\"dead_name_records\": %llu, "
		       "\"unreferenced_records\": %llu, \"to\": ",
		       i ? ", " : "", r->id, compact_action_name(r->action),
		       (unsigned long long)r->physical,
		       (unsigned long long)r->live_bytes,
		       (unsigned long long)r->nlive,
		       (unsigned long long)r->nnames,
		       (unsigned long long)r->ndead_names,
		       (unsigned long long)r->nunref);
		if (r->out_id)
			printf("\"%06u.kvd\"", r->out_id);
		else
			printf("null");
		printf(", \"reason\": ");
		if (r->why)
			tbuf_json_fput(stdout, r->why);
		else
			printf("null");
		printf("}");
	}
	printf("], \"examined\": %zu, \"compacted\": %llu, \"removed\": %llu, "
	       "\"skipped\": %llu, \"records_copied\": %llu, "
	       "\"name_records_copied\": %llu, \"bytes_copied\": %llu, "
	       "\"dead_name_records\": %llu, \"unreferenced_records\": %llu, "
	       "\"orphans_freed\": %llu, \"physical_before\": %llu, "
	       "\"physical_after\": %llu, \"data_files_before\": %llu, "
	       "\"data_files_after\": %llu, \"bytes_reclaimed\": %llu}\n",
	       g->nfiles, (unsigned long long)g->ncompacted,
	       (unsigned long long)g->nremoved, (unsigned long long)g->nskipped,
	       (unsigned long long)g->copied_recs,
	       (unsigned long long)g->copied_names,
	       (unsigned long long)g->copied_bytes,
	       (unsigned long long)g->dead_names,
	       (unsigned long long)g->unref_recs,
	       (unsigned long long)g->orphans,
	       (unsigned long long)g->before.physical,
	       (unsigned long long)g->after.physical,
	       (unsigned long long)g->before.nfiles,
	       (unsigned long long)g->after.nfiles,
	       (unsigned long long)(g->before.physical > g->after.physical
					    ? g->before.physical -
						      g->after.physical
					    : 0));
}

static int gc_parse(struct gc_opts *g, int argc, char **argv, int *help)
{
	static const struct option opts[] = {
		{"threshold", required_argument, NULL, 't'},
		{"dry-run", no_argument, NULL, 'n'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	unsigned long v;
	char *end;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (*end == '%')
				end++;
			if (errno || end == optarg || *end || v < 1 ||
			    v > 100 || optarg[0] < '0' || optarg[0] > '9') {
				kc_err("gc",
				       "--threshold wants a percentage from 1 "
				       "to 100, not '%s'",
				       optarg);
				return -1;
			}
			g->threshold = (unsigned)v;
			break;
		case 'n':
			g->dry_run = 1;
			break;
		case 'j':
			g->json = 1;
			break;
		case 'h':
			*help = 1;
			break;
		default:
			return kc_opt_error("gc", argv, c);
		}
	}
	if (*help)
		return 0;
	return kc_nargs("gc", argc - optind, 1, 1, "DATADIR") < 0 ? -1 : optind;
}

/* Opens, compacts and reports; returns the exit status. */
static int gc_run(const struct gc_opts *go, const char *datadir)
{
	struct kvdb_opts ko = {
		.flags = KVDB_DATA_RW | KVDB_DATA_DIR | KVDB_INDEX_DURABLE,
		.max_id = COMPACT_MAX_ID,
		.who = "gc",
		.hooks = {.error = kc_offline_error, .arg = (void *)"gc"},
	};
	struct compact_opts co = {.threshold = go->threshold,
				  .dry_run = go->dry_run};
	struct compact_result r = {0};
	struct kvdb_error err;
	struct kvdb *db = NULL;
	int ret = KC_EXIT_ERROR;

	if (kvdb_open(&db, datadir, &ko, &err) < 0) {
		if (err.stage == KVDB_STAGE_INDEX_MISSING)
			kc_err("gc",
			       "%s: %s; gc needs the index to tell live "
			       "records from dead ones (kvfsctl fsck "
			       "--rebuild-index makes one)",
			       err.path, strerror(-err.err));
		else
			kc_err("gc", "%s", err.msg);
		return KC_EXIT_ERROR;
	}
	compact_run(db, &co, &r);
	if (r.started) {
		if (go->json)
			gc_report_json(datadir, go, &r);
		else
			gc_report_text(datadir, go, &r);
		ret = r.failed	   ? KC_EXIT_ERROR
		      : r.nskipped ? KC_EXIT_DAMAGE
				   : KC_EXIT_OK;
	}
	compact_result_free(&r);
	kvdb_close(db);
	return ret;
}

int kc_gc(int argc, char **argv)
{
	struct gc_opts go = {.threshold = COMPACT_DEFAULT_THRESHOLD};
	char *datadir;
	int help = 0, i, ret;

	i = gc_parse(&go, argc, argv, &help);
	if (i < 0)
		return KC_EXIT_ERROR;
	if (help) {
		fputs(gc_usage, stdout);
		return KC_EXIT_OK;
	}
	datadir = kc_offline_datadir(&gc_offline, argv[i]);
	if (!datadir)
		return KC_EXIT_ERROR;
	/* What an operator changed goes to the system log. */
	if (!go.dry_run)
		kc_offline_log_changes();
	ret = gc_run(&go, datadir);
	free(datadir);
	return ret;
}
