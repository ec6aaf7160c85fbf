/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl fsck: the command line of the offline check of a data directory
 * (the engines are in fs/kvdb: check.h, rebuild.h). Parses the options,
 * refuses a mounted data directory, opens it with kvdb_open() (kvfs.lock
 * held for the whole run), runs the rebuild and the check, and prints the
 * findings as text or as one JSON object. The summary counts are one field
 * table that both printers walk. Its exit statuses are e2fsck's
 * (fsck_exit_status), not the other commands' KC_EXIT_*. Single-threaded.
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

/* fsck's exit statuses, as kvfsctl(8) states them. */
enum fsck_exit {
	FSCK_EXIT_CLEAN = 0,	   /* nothing wrong */
	FSCK_EXIT_REPAIRED = 1,	   /* damage found, all of it repaired */
	FSCK_EXIT_DAMAGE_LEFT = 4, /* damage found and left */
	FSCK_EXIT_ERROR = 8,	   /* the check could not run or finish */
	FSCK_EXIT_USAGE = 16,	   /* bad options or arguments */
};

/* How far the command got. */
enum fsck_stage {
	FSCK_BAD_USAGE, /* the options or arguments are wrong */
	FSCK_FAILED,	/* the check could not run or finish */
	FSCK_CHECKED,	/* the findings are in */
};

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
	"Exit status, as e2fsck's:\n"
	"   0  nothing wrong (records that could be reclaimed do not count)\n"
	"   1  damage found and all of it repaired (short blocks dropped, "
	"names\n"
	"      fixed, files the rebuild put in /lost+found)\n"
	"   4  damage left: any damage without --repair, a corrupt block "
	"kept,\n"
	"      a repair that failed, records the rebuild left out\n"
	"   8  operational error (DATADIR mounted, locked, unreadable, I/O,\n"
	"      memory)\n"
	"  16  usage error (bad option or arguments)\n";

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
	FSCK_F_NAMES,	/* JSON: the names a rebuild would lose */
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
	RB("lost_found", ", ", " put in /lost+found", lost_found),
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
	{"names", NULL, NULL, FSCK_F_NAMES, 0, 0},
	SUM("names_wrong", "; ", " names a rebuild would lose", FSCK_F_COUNT,
	    names_wrong, 0),
	SUM("names_fixed", " (", " fixed)", FSCK_F_COUNT, names_fixed, 1),
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

/* a - b, or 0 when b is larger (what a repair left of what was found). */
static uint64_t fsck_left(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/*
 * The exit status (kvfsctl(8)); o is read at FSCK_CHECKED only. Damage is
 * a short or corrupt block, a name a rebuild would lose, a record the
 * rebuild left out, a file it put in /lost+found; it is left unless
 * --repair took care of it. A corrupt block is never repaired (it is
 * kept), and neither is a record left out; a file in /lost+found is.
 */
static int fsck_exit_status(enum fsck_stage stage, const struct fsck_out *o)
{
	const struct check_summary *s;
	uint64_t skipped, lost_found, found, left;

	if (stage == FSCK_BAD_USAGE)
		return FSCK_EXIT_USAGE;
	if (stage == FSCK_FAILED)
		return FSCK_EXIT_ERROR;
	s = &o->res->sum;
	skipped = o->rb->done ? o->rb->skipped : 0;
	lost_found = o->rb->done ? o->rb->lost_found : 0;
	found = s->nshort + s->ncorrupt + s->names_wrong + s->repair_failed +
		skipped + lost_found;
	if (o->repair)
		left = fsck_left(s->nshort, s->dropped) + s->ncorrupt +
		       fsck_left(s->names_wrong, s->names_fixed) +
		       s->repair_failed + skipped;
	else
		left = s->nshort + s->ncorrupt + s->names_wrong + skipped;
	return left    ? FSCK_EXIT_DAMAGE_LEFT
	       : found ? FSCK_EXIT_REPAIRED
		       : FSCK_EXIT_CLEAN;
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

	if (x->kind == CHECK_NAME) {
		printf("%-8s %s: %s%s\n", fsck_kind_label(x->kind),
		       x->path ? x->path : "?", x->detail ? x->detail : "",
		       x->action == CHECK_ACTION_FIXED ? " -> fixed"
		       : o->repair		       ? " -> not fixed"
						       : "");
		return;
	}
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

/*
 * A rebuild's note is about a file it put in /lost+found when it names
 * one there; the other notes are about records it left out.
 */
static int fsck_note_lost_found(const struct rebuild_note *n)
{
	static const char lf[] = "/lost+found/";

	return strncmp(n->what, lf, sizeof(lf) - 1) == 0;
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
		printf("%s %s: %s\n",
		       fsck_note_lost_found(&rb->notes[i]) ? "LOST+FOUND"
							   : "LEFT OUT",
		       rb->notes[i].what, rb->notes[i].why);
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
		printf(", \"lost_found\": %s",
		       fsck_note_lost_found(&rb->notes[i]) ? "true" : "false");
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

static void fsck_json_name(const struct check_finding *x)
{
	printf("{\"path\": ");
	fsck_json_str_or_null(x->path);
	printf(", \"ino\": %llu, \"detail\": ", (unsigned long long)x->ino);
	fsck_json_str_or_null(x->detail);
	printf(", \"data_file\": %u, \"offset\": %llu, \"action\": \"%s\"}",
	       x->data_file, (unsigned long long)x->offset,
	       x->action == CHECK_ACTION_FIXED ? "fixed" : "none");
}

/* The JSON array a finding goes in (FSCK_F_DAMAGED, _NAMES, _RECLAIM). */
static enum fsck_ftype fsck_json_group(const struct check_finding *x)
{
	if (x->kind == CHECK_SHORT || x->kind == CHECK_CORRUPT)
		return FSCK_F_DAMAGED;
	return x->kind == CHECK_NAME ? FSCK_F_NAMES : FSCK_F_RECLAIM;
}

/* The findings of one group (fsck_json_group) as a JSON array. */
static void fsck_json_list(const struct check_result *res,
			   enum fsck_ftype group)
{
	int first = 1;

	printf("[");
	for (size_t i = 0; i < res->n; i++) {
		const struct check_finding *x = &res->v[i];

		if (fsck_json_group(x) != group)
			continue;
		printf("%s", first ? "" : ", ");
		first = 0;
		if (group == FSCK_F_DAMAGED)
			fsck_json_damaged(x);
		else if (group == FSCK_F_NAMES)
			fsck_json_name(x);
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
		else if (f->type == FSCK_F_DAMAGED || f->type == FSCK_F_NAMES ||
			 f->type == FSCK_F_RECLAIM)
			fsck_json_list(o->res, f->type);
		else if (f->type == FSCK_F_CLEAN)
			printf("%s", fsck_exit_status(FSCK_CHECKED, o) ==
						     FSCK_EXIT_CLEAN
					     ? "true"
					     : "false");
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

/*
 * Opens, rebuilds, checks and reports; returns the exit status. A repair
 * that failed is not an error of the run: it is damage left.
 */
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
	int ret = fsck_exit_status(FSCK_FAILED, NULL);

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
		ret = fsck_exit_status(FSCK_CHECKED, &o);
	}
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
		return fsck_exit_status(FSCK_BAD_USAGE, NULL);
	if (help) {
		fputs(fsck_usage, stdout);
		return FSCK_EXIT_CLEAN;
	}
	/* Not a data directory, mounted, locked: it cannot be checked. */
	datadir = kc_offline_datadir(&fsck_offline, argv[i]);
	if (!datadir)
		return fsck_exit_status(FSCK_FAILED, NULL);
	/* What an operator changed goes to the system log. */
	if (fo.repair || fo.rebuild)
		kc_offline_log_changes();
	ret = fsck_run(&fo, datadir);
	free(datadir);
	return ret;
}
