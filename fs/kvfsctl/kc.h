/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl's private declarations: the helper every command uses (kc.c:
 * options, MOUNTPOINT|DATADIR resolution, the control-socket client,
 * output helpers) and the commands' entry points (main.c dispatches to
 * them, one cmd-*.c file each). The control protocol itself is
 * ctlproto.h's. kvfsctl is a single-threaded command-line program; none of
 * this is thread-safe, and nothing here takes a lock.
 *
 * Error contract: functions returning int give 0 (or a count) or -errno;
 * those that take a command name (cmd) have said what failed on stderr
 * ("kvfsctl CMD: ...") before returning an error. Commands return an exit
 * status (KC_EXIT_*).
 */
#ifndef KVFS_KVFSCTL_KC_H
#define KVFS_KVFSCTL_KC_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctlproto.h"

struct store_hdr;

/* Exit statuses, as kvfsctl(8) states them. */
#define KC_EXIT_OK 0
#define KC_EXIT_DAMAGE 1 /* evict: above target; gc: a file skipped */
#define KC_EXIT_ERROR 2	 /* usage or operational error */

/* What a MOUNTPOINT|DATADIR argument turned out to be. */
struct kc_target {
	char *path;	  /* the argument, resolved (realpath) */
	char *datadir;	  /* the data directory (realpath) */
	char *mountpoint; /* where it is mounted; NULL if not or unknown */
	int mounted;	  /* a kvfs daemon serves datadir */
	int given_mount;  /* the argument was the mount point */
	long pid;	  /* the daemon's process ID, 0 if unknown */
	struct ctlproto_json status; /* MOUNTPOINT/.kvfs/status when mounted */
};

/*
 * Works out what arg is: a kvfs mount point (it has .kvfs/status) or a data
 * directory (index.db, data/ or kvfs.lock in it), and whether a daemon
 * serves it. Prints what is wrong ("kvfsctl CMD: ...") and returns -errno
 * when it is neither. Reads no name inside the mount but .kvfs/status.
 * Free with kc_target_free().
 */
int kc_target_open(const char *cmd, const char *arg, struct kc_target *t);
void kc_target_free(struct kc_target *t);

/* "kvfsctl CMD: message" on stderr. */
void kc_err(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Human size: "0 B", "4.0 KiB", "1.50 GiB". Returns buf. */
const char *kc_size(char *buf, size_t len, uint64_t bytes);

/* --- what the commands share (kc.c) ---------------------------------- */

/* Exists and is of type (S_IFREG, S_IFDIR...): dir/name, not followed. */
int kc_exists(const char *dir, const char *name, mode_t type);
/*
 * Reads a control file whole: *buf malloc'd and NUL-terminated; -errno
 * (-EFBIG past 16 MiB).
 */
int kc_read_file(const char *path, char **buf);

/*
 * One request (ctlproto.h: cmd, and arg for the commands that take one)
 * on DATADIR's control socket, waiting at most timeout_s seconds for the
 * answer. Returns 0 with *resp the daemon's answer (ok true), 1 with *resp
 * its error (ok false), or -errno when there was no answer (nothing to
 * free then; -EMSGSIZE: arg makes the line too long, -EBADMSG: the answer
 * is not a response). *raw, when not NULL, gets the response text
 * (malloc'd) on 0 and 1.
 */
int kc_request_wait(const char *datadir, enum ctlproto_cmd cmd, const char *arg,
		    struct ctlproto_json *resp, char **raw, int timeout_s);
/* kc_request_wait() with the usual timeout. */
int kc_request(const char *datadir, enum ctlproto_cmd cmd, const char *arg,
	       struct ctlproto_json *resp, char **raw);
/* Prints why a request got no answer (rc from kc_request()). */
void kc_request_err(const char *cmd, const struct kc_target *t, int rc);
/* Prints the error the daemon answered: "WHAT: message (ERRNAME)". */
void kc_daemon_err(const char *cmd, const char *what,
		   const struct ctlproto_json *resp);
/*
 * A target that must be served by a running daemon: prints why not and
 * returns -ENOTCONN otherwise.
 */
int kc_need_mounted(const char *cmd, const struct kc_target *t);
/*
 * PATH as the daemon wants it, relative to the mount's root and starting
 * with '/': an absolute path under the mount point loses that prefix;
 * anything else already is one. malloc'd, NULL without memory.
 */
char *kc_mount_rel(const struct kc_target *t, const char *path);
/* The string value of key, "?" when absent or null. */
const char *kc_str(const struct ctlproto_json *j, const char *key);

/* The options every command but evict, fsck and gc takes. */
struct kc_opts {
	int json;
	int help;
	double watch;
	long count;
};

/* kc_begin(): the usage was printed on --help. */
#define KC_BEGIN_HELP (-2)

/*
 * Says what is wrong with the option getopt_long() just refused (it
 * returned ch, ':' or '?', with opterr 0 and ":" leading its optstring);
 * returns -1.
 */
int kc_opt_error(const char *cmd, char **argv, int ch);
/* Checks the number of positional arguments; -1 after a usage error. */
int kc_nargs(const char *cmd, int have, int min, int max, const char *what);
/*
 * A command's options (--json, --help and, when watch is set, --watch
 * SECONDS and --count N), --help and argument count (min to max, named
 * args in errors): returns the index of its first argument, KC_BEGIN_HELP
 * once usage is printed, or -1 after an error message.
 */
int kc_begin(const char *cmd, int argc, char **argv, int watch,
	     const char *usage, int min, int max, const char *args,
	     struct kc_opts *o);

/*
 * What verdicts and clear share (cmd-verdicts.c): options, target, one
 * request about PATH (for verdicts without PATH, the totals) and its
 * errors; only the request and the printing of the answer differ.
 */
struct kc_path_cmd {
	const char *name;      /* the command: "verdicts" or "clear" */
	const char *usage;     /* its --help */
	const char *args;      /* its arguments, for usage errors */
	int min_args;	       /* 2 when PATH is required */
	enum ctlproto_cmd req; /* about PATH: CTLPROTO_VERDICT or _CLEAR */
	/* Prints the daemon's answer about PATH as text. */
	void (*text)(const struct ctlproto_json *resp);
};
int kc_path_cmd_run(const struct kc_path_cmd *pc, int argc, char **argv);

/* --- the commands: each returns the exit status ------------------------ */

int kc_status(int argc, char **argv);	/* cmd-status.c */
int kc_stats(int argc, char **argv);	/* cmd-stats.c */
int kc_verdicts(int argc, char **argv); /* cmd-verdicts.c */
int kc_clear(int argc, char **argv);	/* cmd-clear.c */
int kc_evict(int argc, char **argv);	/* cmd-evict.c */
int kc_sync(int argc, char **argv);	/* cmd-sync.c */
/* The fsck command (cmd-fsck.c): returns its own exit status (0-16). */
int kc_fsck(int argc, char **argv);
/* The gc command (kvfsctl_gc.c): returns the exit status. */
int kc_gc(int argc, char **argv);

#endif
