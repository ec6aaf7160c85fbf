/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl fsck: the command line of the offline check of a data directory
 * (the engines are in fs/kvdb: check.h, rebuild.h). Parses the options,
 * refuses a mounted data directory, opens it with kvdb_open() (kvfs.lock
 * held for the whole run), runs the rebuild and the check, and prints the
 * findings as text or as one JSON object. The summary counts are one field
 * table that both printers walk. Single-threaded.
 */
#include "kc.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "kvdb.h"
#include "log.h"
#include "offline.h"
#include "tbuf.h"
#include "rebuild.h"

struct fsck_opts {
	int json;
	int repair;
	int rebuild;
};

/* The progress bar (stderr, terminals only). */
struct fsck_bar {
	int on;
	uint64_t total;
	double last;
};

/* Everything the printers show. */
struct fsck_out {
	const char *datadir;
	size_t ndfs;
	int repair;
	const struct rebuild_result *rb;
	const struct check_result *res;
};

static const struct kc_offline fsck_offline = {
	.cmd = "fsck", .mounted_hint = "", .lockers = "fsck"};

static const char fsck_usage[] =
	"usage: kvfsctl fsck [--repair] [--rebuild-index] [--json] DATADIR\n"
	"\n"
	"Checks an unmounted data directory: the index against the data\n"
	"files, and every chunk's CRC32C. Reports each damaged block by path\n"
	"with the reason, and records that no name points at (space that\n"
	"could be reclaimed). Refuses to run while kvfs serves DATADIR.\n"
	"\n"
	"  --repair         drop the blocks that are provably short (their "
	"data\n"
	"                   file is missing or ends inside the record); "
	"corrupt\n"
	"                   blocks are listed and kept\n"
	"  --rebuild-index  move index.db aside (index.db.old.TIME) and build "
	"a\n"
	"                   new one from the data files alone, then check it\n"
	"  --json           print one JSON object instead of text\n"
	"  -h, --help       print this help\n"
	"\n"
	"Exit status: 0 clean, 1 damage found (also after --repair), 2 usage "
	"or\n"
	"operational error (DATADIR mounted, unreadable, ...).\n";

/* --- hooks ------------------------------------------------------------ */

/* The hooks' arg is the progress bar: the command's name is known here. */
static void fsck_error(void *arg, const char *msg)
{
	(void)arg;
	kc_offline_error((void *)"fsck", msg);
}

static void fsck_progress(void *arg, enum kvdb_progress what, const char *label,
			  uint64_t done, uint64_t total)
{
	struct fsck_bar *b = arg;
	char x[32], y[32], bar[31];
	double now;
	int fill;

	if (!b->on)
		return;
	if (what == KVDB_PROGRESS_BEGIN) {
		b->total = total ? total : 1;
		b->last = 0;
		return;
	}
	if (what == KVDB_PROGRESS_END) {
		fprintf(stderr, "\r\033[K");
		return;
	}
	now = (double)clock_monotonic_ns() / 1e9;
	if (now - b->last < 0.1 && done < b->total)
		return;
	b->last = now;
	if (done > b->total)
		done = b->total;
	fill = (int)(done * 30 / b->total);
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '.', (size_t)(30 - fill));
	bar[30] = '\0';
	fprintf(stderr, "\r%-20s [%s] %3d%% %s/%s\033[K", label, bar,
		(int)(done * 100 / b->total), kc_size(x, sizeof(x), done),
		kc_size(y, sizeof(y), b->total));
}

/* --- the field tables -------------------------------------------------- */

enum fsck_ftype {
	FSCK_F_COUNT,	/* a number */
	FSCK_F_SIZE,	/* text: "1.5 MiB", JSON: bytes */
	FSCK_F_OLD,	/* the old index's name (rebuild) */
	FSCK_F_NOTES,	/* JSON: the rebuild's notes */
	FSCK_F_DAMAGED, /* JSON: the damaged blocks */
	FSCK_F_RECLAIM, /* JSON: the reclaimable records */
	FSCK_F_CLEAN,	/* JSON: true or false */
};

struct fsck_field {
	const char *key;  /* JSON key; NULL: text only */
	const char *pre;  /* text before the value; NULL: JSON only */
	const char *post; /* text after it */
	enum fsck_ftype type;
	size_t off;	 /* of the uint64_t in the table's struct */
	int repair_only; /* text: shown after --repair only */
};

#define RB(key, pre, post, m)                                                  \
	{                                                                      \
		key, pre, post, FSCK_F_COUNT,                                  \
			offsetof(struct rebuild_result, m), 0                  \
	}
/* The rebuild's line; each key in the order kvfsctl(8) lists it. */
static const struct fsck_field fsck_rebuild_fields[] = {
	RB("files", "rebuilt index.db from the data files: ", " files", files),
	RB("directories", ", ", " directories", dirs),
	RB("data_records", " (", " data records", data_recs),
	RB("name_records", ", ", " name records", name_recs),
	RB("superseded", "; ", " superseded", superseded),
	RB("torn", ", ", " torn", torn),
	RB("no_whole_data", ", ", " inodes without a whole data record",
	   no_data),
	RB("left_out", ", ", " left out", skipped),
	{"old_index", "); ", "\n", FSCK_F_OLD, 0, 0},
	{"notes", NULL, NULL, FSCK_F_NOTES, 0, 0},
};
#undef RB

#define SUM(key, pre, post, type, m, rep)                                      \
	{                                                                      \
		key, pre, post, type, offsetof(struct check_summary, m), rep   \
	}
/* The summary: two lines of text, the same counts in JSON. */
static const struct fsck_field fsck_summary_fields[] = {
	SUM("checked", "checked ", " blocks", FSCK_F_COUNT, checked, 0),
	SUM("payload_bytes", " (", " of payload)", FSCK_F_SIZE, payload_bytes,
	    0),
	SUM(NULL, ": ", " damaged", FSCK_F_COUNT, damaged, 0),
	{"damaged", NULL, NULL, FSCK_F_DAMAGED, 0, 0},
	SUM("short", " (", " provably short", FSCK_F_COUNT, nshort, 0),
	SUM("corrupt", ", ", " corrupt)", FSCK_F_COUNT, ncorrupt, 0),
	SUM("dropped", ", ", " dropped", FSCK_F_COUNT, dropped, 1),
	{"reclaimable", NULL, NULL, FSCK_F_RECLAIM, 0, 0},
	SUM(NULL, "\nreclaimable: ", " unreferenced records", FSCK_F_COUNT,
	    unreferenced, 0),
	SUM("unreferenced_bytes", " (", ")", FSCK_F_SIZE, unreferenced_bytes,
	    0),
	SUM(NULL, ", ", " torn records", FSCK_F_COUNT, torn, 0),
	SUM("torn_bytes", " (", ")", FSCK_F_SIZE, torn_bytes, 0),
	SUM("stale_name_records", ", ", " stale name records", FSCK_F_COUNT,
	    stale_names, 0),
	SUM("orphans", ", ", " orphaned inodes (freed at the next mount)\n",
	    FSCK_F_COUNT, orphans, 0),
	{"clean", NULL, NULL, FSCK_F_CLEAN, 0, 0},
};
#undef SUM

static uint64_t fsck_u64(const void *base, const struct fsck_field *f)
{
	uint64_t v;

	memcpy(&v, (const char *)base + f->off, sizeof(v));
	return v;
}

static int fsck_clean(const struct fsck_out *o)
{
	return !(o->res->sum.nshort + o->res->sum.ncorrupt +
		 (o->rb->done ? o->rb->skipped : 0));
}

static void fsck_text_fields(const struct fsck_out *o,
			     const struct fsck_field *t, size_t n,
			     const void *base)
{
	char buf[32];

	for (size_t i = 0; i < n; i++) {
		const struct fsck_field *f = &t[i];

		if (!f->pre || (f->repair_only && !o->repair))
			continue;
		fputs(f->pre, stdout);
		if (f->type == FSCK_F_SIZE)
			fputs(kc_size(buf, sizeof(buf), fsck_u64(base, f)),
			      stdout);
		else if (f->type == FSCK_F_OLD)
			printf("%s%s",
			       o->rb->old ? "old index moved to "
					  : "there was no old index",
			       o->rb->old ? o->rb->old : "");
		else
			printf("%llu", (unsigned long long)fsck_u64(base, f));
		fputs(f->post, stdout);
	}
}

/* --- text ------------------------------------------------------------- */

static const char *fsck_kind_label(enum check_kind k)
{
	switch (k) {
	case CHECK_SHORT:
		return "SHORT";
	case CHECK_CORRUPT:
		return "CORRUPT";
	case CHECK_UNREFERENCED:
		return "UNREF";
	case CHECK_TORN:
		return "TORN";
	case CHECK_NAME:
		return "NAME";
	case CHECK_STALE_NAME:
		break;
	}
	return "STALE";
}

static void fsck_text_finding(const struct fsck_out *o,
			      const struct check_finding *x)
{
	char a[32];

	if (x->kind == CHECK_SHORT || x->kind == CHECK_CORRUPT) {
		printf("%-8s %s: %s%s\n", fsck_kind_label(x->kind),
		       x->path ? x->path : "?", x->detail,
		       x->action == CHECK_ACTION_DROPPED ? " -> dropped"
		       : x->action == CHECK_ACTION_KEPT	 ? " -> kept"
		       : o->repair			 ? " -> not dropped"
							 : "");
		return;
	}
	printf("%-8s %06u.kvd+%llu: %s record of inode %llu (%s), %s\n",
	       fsck_kind_label(x->kind), x->data_file,
	       (unsigned long long)x->offset,
	       x->kind == CHECK_STALE_NAME ? "name" : "data",
	       (unsigned long long)x->ino, x->path ? x->path : "?",
	       kc_size(a, sizeof(a), x->bytes));
}

static void fsck_report_text(const struct fsck_out *o)
{
	const struct rebuild_result *rb = o->rb;

	printf("fsck of %s: index.db, %zu data files\n", o->datadir, o->ndfs);
	if (rb->done)
		fsck_text_fields(o, fsck_rebuild_fields,
				 sizeof(fsck_rebuild_fields) /
					 sizeof(fsck_rebuild_fields[0]),
				 rb);
	for (size_t i = 0; i < rb->nnotes; i++)
		printf("LEFT OUT %s: %s\n", rb->notes[i].what,
		       rb->notes[i].why);
	for (size_t i = 0; i < o->res->n; i++)
		fsck_text_finding(o, &o->res->v[i]);
	fsck_text_fields(o, fsck_summary_fields,
			 sizeof(fsck_summary_fields) /
				 sizeof(fsck_summary_fields[0]),
			 &o->res->sum);
}

/* --- JSON ------------------------------------------------------------- */

static void fsck_json_str_or_null(const char *s)
{
	if (s)
		tbuf_json_fput(stdout, s);
	else
		printf("null");
}

static void fsck_json_notes(const struct rebuild_result *rb)
{
	printf("[");
	for (size_t i = 0; i < rb->nnotes; i++) {
		printf("%s{\"what\": ", i ? ", " : "");
		tbuf_json_fput(stdout, rb->notes[i].what);
		printf(", \"why\": ");
		tbuf_json_fput(stdout, rb->notes[i].why);
		printf("}");
	}
	printf("]");
}

static void fsck_json_damaged(const struct check_finding *x)
{
	printf("{\"path\": ");
	tbuf_json_fput(stdout, x->path ? x->path : "?");
	printf(", \"ino\": %llu, \"reason\": \"%s\", \"detail\": ",
	       (unsigned long long)x->ino,
	       x->kind == CHECK_SHORT ? "short" : "corrupt");
	tbuf_json_fput(stdout, x->detail);
	printf(", \"data_file\": %u, \"offset\": %llu, \"chunk\": ",
	       x->data_file, (unsigned long long)x->offset);
	if (x->chunk >= 0)
		printf("%lld", (long long)x->chunk);
	else
		printf("null");
	printf(", \"action\": \"%s\"}",
	       x->action == CHECK_ACTION_DROPPED ? "dropped"
	       : x->action == CHECK_ACTION_KEPT	 ? "kept"
						 : "none");
}

static void fsck_json_reclaim(const struct check_finding *x)
{
	printf("{\"kind\": \"%s\", \"data_file\": %u, \"offset\": %llu, "
	       "\"ino\": %llu, \"bytes\": %llu, \"path\": ",
	       x->kind == CHECK_STALE_NAME     ? "stale_name"
	       : x->kind == CHECK_UNREFERENCED ? "unreferenced"
					       : "torn",
	       x->data_file, (unsigned long long)x->offset,
	       (unsigned long long)x->ino, (unsigned long long)x->bytes);
	fsck_json_str_or_null(x->path);
	printf("}");
}

/* The findings of one group (damaged or reclaimable) as a JSON array. */
static void fsck_json_list(const struct check_result *res, int damaged)
{
	int first = 1;

	printf("[");
	for (size_t i = 0; i < res->n; i++) {
		const struct check_finding *x = &res->v[i];
		int is_damaged =
			x->kind == CHECK_SHORT || x->kind == CHECK_CORRUPT;

		if (is_damaged != damaged)
			continue;
		printf("%s", first ? "" : ", ");
		first = 0;
		if (damaged)
			fsck_json_damaged(x);
		else
			fsck_json_reclaim(x);
	}
	printf("]");
}

static void fsck_json_fields(const struct fsck_out *o,
			     const struct fsck_field *t, size_t n,
			     const void *base)
{
	for (size_t i = 0; i < n; i++) {
		const struct fsck_field *f = &t[i];

		if (!f->key)
			continue;
		printf(", \"%s\": ", f->key);
		if (f->type == FSCK_F_OLD)
			fsck_json_str_or_null(o->rb->old);
		else if (f->type == FSCK_F_NOTES)
			fsck_json_notes(o->rb);
		else if (f->type == FSCK_F_DAMAGED || f->type == FSCK_F_RECLAIM)
			fsck_json_list(o->res, f->type == FSCK_F_DAMAGED);
		else if (f->type == FSCK_F_CLEAN)
			printf("%s", fsck_clean(o) ? "true" : "false");
		else
			printf("%llu", (unsigned long long)fsck_u64(base, f));
	}
}

static void fsck_report_json(const struct fsck_out *o)
{
	printf("{\"datadir\": ");
	tbuf_json_fput(stdout, o->datadir);
	printf(", \"data_files\": %zu, \"rebuilt\": ", o->ndfs);
	if (o->rb->done) {
		/* The table's first key starts the object, not a ", ". */
		printf("{\"files\": %llu", (unsigned long long)o->rb->files);
		fsck_json_fields(
			o, fsck_rebuild_fields + 1,
			sizeof(fsck_rebuild_fields) /
					sizeof(fsck_rebuild_fields[0]) -
				1,
			o->rb);
		printf("}");
	} else {
		printf("null");
	}
	fsck_json_fields(o, fsck_summary_fields,
			 sizeof(fsck_summary_fields) /
				 sizeof(fsck_summary_fields[0]),
			 &o->res->sum);
	printf("}\n");
}

/* --- the command ------------------------------------------------------ */

static int fsck_parse(struct fsck_opts *f, int argc, char **argv, int *help)
{
	static const struct option opts[] = {
		{"repair", no_argument, NULL, 'r'},
		{"rebuild-index", no_argument, NULL, 'R'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			f->repair = 1;
			break;
		case 'R':
			f->rebuild = 1;
			break;
		case 'j':
			f->json = 1;
			break;
		case 'h':
			*help = 1;
			break;
		default:
			return kc_opt_error("fsck", argv, c);
		}
	}
	if (*help)
		return 0;
	return kc_nargs("fsck", argc - optind, 1, 1, "DATADIR") < 0 ? -1
								    : optind;
}

/* Says why kvdb_open() or kvdb_open_index() failed, as fsck words it. */
static void fsck_open_err(const char *datadir, const struct kvdb_error *e)
{
	if (e->stage == KVDB_STAGE_INDEX_MISSING)
		kc_err("fsck",
		       "%s: %s; to make one from the data files run kvfsctl "
		       "fsck --rebuild-index %s",
		       e->path, strerror(-e->err), datadir);
	else if (e->stage == KVDB_STAGE_INDEX)
		kc_err("fsck", "cannot read %s: %s%s", e->path,
		       strerror(-e->err),
		       e->err == -EIO || e->err == -EMEDIUMTYPE
			       ? "; rebuild it with --rebuild-index"
			       : "");
	else
		kc_err("fsck", "%s", e->msg);
}

/* Opens, rebuilds, checks and reports; returns the exit status. */
static int fsck_run(const struct fsck_opts *fo, const char *datadir)
{
	struct fsck_bar bar = {.on = isatty(STDERR_FILENO)};
	struct kvdb_opts ko = {
		.flags = KVDB_NO_INDEX | KVDB_INDEX_COUNT |
			 (fo->repair ? KVDB_DATA_RW : 0),
		.who = "fsck",
		.hooks = {.error = fsck_error,
			  .progress = fsck_progress,
			  .arg = &bar},
	};
	struct rebuild_result rb = {0};
	struct check_result res = {0};
	struct kvdb_scan scan = {0};
	struct kvdb_error err;
	struct check_opts co = {.repair = fo->repair};
	struct rebuild_opts ro;
	struct kvdb *db = NULL;
	int ret = KC_EXIT_ERROR;

	co.now_ns = (int64_t)clock_realtime_ns();
	ro.now_ns = co.now_ns;
	if (kvdb_open(&db, datadir, &ko, &err) < 0) {
		fsck_open_err(datadir, &err);
		goto out;
	}
	if (fo->rebuild && rebuild_run(db, &ro, &scan, &rb) < 0)
		goto out;
	if (kvdb_open_index(db, &err) < 0) {
		fsck_open_err(datadir, &err);
		goto out;
	}
	if (check_run(db, &co, &scan, &res) < 0)
		goto out;
	{
		struct fsck_out o = {.datadir = datadir,
				     .ndfs = db->ndfs,
				     .repair = fo->repair,
				     .rb = &rb,
				     .res = &res};

		if (fo->json)
			fsck_report_json(&o);
		else
			fsck_report_text(&o);
		ret = fsck_clean(&o) ? KC_EXIT_OK : KC_EXIT_DAMAGE;
	}
	if (res.sum.repair_failed)
		ret = KC_EXIT_ERROR;
out:
	check_result_free(&res);
	rebuild_result_free(&rb);
	kvdb_scan_free(&scan);
	kvdb_close(db);
	return ret;
}

int kc_fsck(int argc, char **argv)
{
	struct fsck_opts fo = {0};
	char *datadir;
	int help = 0, i, ret;

	i = fsck_parse(&fo, argc, argv, &help);
	if (i < 0)
		return KC_EXIT_ERROR;
	if (help) {
		fputs(fsck_usage, stdout);
		return KC_EXIT_OK;
	}
	datadir = kc_offline_datadir(&fsck_offline, argv[i]);
	if (!datadir)
		return KC_EXIT_ERROR;
	/* What an operator changed goes to the system log. */
	if (fo.repair || fo.rebuild)
		kc_offline_log_changes();
	ret = fsck_run(&fo, datadir);
	free(datadir);
	return ret;
}
