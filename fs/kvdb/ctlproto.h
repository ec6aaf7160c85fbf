/* SPDX-License-Identifier: MIT */
/*
 * The control protocol between kvfs and kvfsctl(8), defined once for both
 * ends: the control socket's name, limits and timeouts, its request line
 * (build on the client, parse on the daemon), the percent-encoding of its
 * argument, the shape of its JSON response (write an error on the daemon,
 * parse on the client), and the names of the metrics the daemon exports
 * in MOUNTPOINT/.kvfs/stats. Plain C on core (datadir.h, tbuf.h): no
 * FUSE, no SQLite, no I/O but ctlproto_recv_request() and
 * ctlproto_send_all() on a given socket.
 *
 * The socket: a Unix stream socket at DATADIR/kvfs.sock (mode 0600) for
 * the requests that need an answer computed on demand or that change
 * something, which the read-only files under MOUNTPOINT/.kvfs/ cannot
 * carry. It is not a general RPC: one connection carries one request line
 * and gets one response, then the daemon closes it.
 *
 *   request   COMMAND [SP ARGUMENT] LF, at most CTLPROTO_LINE_MAX bytes
 *             with the LF, and nothing after it. For "verdict" and
 *             "clear", ARGUMENT is a path within the mount,
 *             percent-encoded: every byte outside 0x21..0x7e, and '%'
 *             itself, is written %XX (so it has no space; %00 is refused).
 *             For "evict" it is a byte count or N% as it is.
 *   commands  "info"            version, datadir, mount point, pid
 *             "status"          counts that need the index (files, dirs)
 *             "verdicts"        the lookup manager's totals
 *             "verdict PATH"    the verdict held for PATH, and the index's
 *                               view of it
 *             "clear PATH"      forgets PATH's verdict (lifts a quarantine)
 *                               and makes the kernel forget the name
 *             "sync"            waits until every file closed before it
 *                               is saved and committed, then syncs the
 *                               data files and the index
 *             "evict TARGET"    evicts least-recently-used blocks nobody
 *                               has open until use is at most TARGET: a
 *                               byte count, or N% of the capacity
 *   response  one JSON object and LF. {"ok": true, ...} on success,
 *             {"ok": false, "error": "ENOENT", "message": "..."} otherwise.
 *
 * Threads and locks: none here; everything is reentrant (the metric table
 * is constant). Error contract: int functions return 0 (or a length) or
 * -errno; the parsers also give a message (a constant string) saying what
 * is wrong, fit for an error response.
 */
#ifndef KVFS_CTLPROTO_H
#define KVFS_CTLPROTO_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include "datadir.h"
#include "tbuf.h"

/* The socket's name inside DATADIR. */
#define CTLPROTO_SOCK_NAME DATADIR_SOCK
/* Longest request line, LF included. */
#define CTLPROTO_LINE_MAX 16384
/* Seconds the daemon lets a client take to send its request or read. */
#define CTLPROTO_TIMEOUT_S 10
/* Seconds a client waits for the daemon's answer... */
#define CTLPROTO_REPLY_TIMEOUT_S 60
/* ... and for an eviction's, which unlinks blocks one by one. */
#define CTLPROTO_EVICT_TIMEOUT_S 3600
/* Longest the daemon waits for the write-behind queue on "sync" (s)... */
#define CTLPROTO_SYNC_WAIT_S 600
/* ... and a client for its answer. */
#define CTLPROTO_SYNC_TIMEOUT_S (CTLPROTO_SYNC_WAIT_S + 60)

/* --- requests ------------------------------------------------------- */

enum ctlproto_cmd {
	CTLPROTO_INFO,
	CTLPROTO_STATUS,
	CTLPROTO_VERDICTS,
	CTLPROTO_VERDICT, /* PATH, percent-encoded */
	CTLPROTO_CLEAR,	  /* PATH, percent-encoded */
	CTLPROTO_EVICT,	  /* TARGET, as it is */
	CTLPROTO_SYNC,	  /* none */
	CTLPROTO_NCMDS
};

/* The command's word on the wire ("info", ...); NULL when out of range. */
const char *ctlproto_cmd_name(enum ctlproto_cmd cmd);

/*
 * Percent-encodes s[0..len): every byte outside 0x21..0x7e and '%' become
 * %XX (upper-case hex). Returns a malloc'd, NUL-terminated string, NULL
 * without memory.
 */
char *ctlproto_encode(const char *s, size_t len);
/*
 * Undoes ctlproto_encode() in place; *len gets the decoded length (the
 * result is also NUL-terminated, but may hold NUL bytes from %00).
 * -EINVAL on a '%' not followed by two hex digits.
 */
int ctlproto_decode(char *s, size_t *len);

/*
 * Builds the request line "NAME\n" or "NAME ARG\n" (ARG encoded for
 * verdict and clear) into *line, malloc'd. -EINVAL when arg is given to a
 * command that takes none, missing or empty for one that needs it, or (for
 * evict) holds a byte outside 0x21..0x7e; -EMSGSIZE when the line would be
 * longer than CTLPROTO_LINE_MAX; -ENOMEM.
 */
int ctlproto_request(enum ctlproto_cmd cmd, const char *arg, char **line);

/* A parsed request. */
struct ctlproto_req {
	enum ctlproto_cmd cmd;
	char *arg;	/* decoded and NUL-terminated, in the buffer; or NULL */
	size_t arg_len; /* strlen(arg) */
};

/*
 * Reads what a client sends on fd until an LF arrives, the client shuts
 * down its side, or cap bytes are read; returns the bytes read into buf
 * (not terminated) or -errno (-ETIMEDOUT when SO_RCVTIMEO expired).
 */
ssize_t ctlproto_recv_request(int fd, char *buf, size_t cap);
/*
 * Parses buf[0..len), the bytes a client sent, as one request: modifies
 * buf. Returns 0, or -EMSGSIZE (longer than CTLPROTO_LINE_MAX) or -EINVAL
 * (empty, no LF, bytes after the LF, a NUL byte, an unknown command, an
 * argument missing, empty, extra or badly encoded, %00 in a path), with
 * *why saying which in words.
 */
int ctlproto_parse(char *buf, size_t len, struct ctlproto_req *req,
		   const char **why);

/* Writes buf[0..len) whole on a socket (no SIGPIPE); 0 or -errno. */
int ctlproto_send_all(int fd, const char *buf, size_t len);

/* --- responses ------------------------------------------------------ */

/* The keys every response has; "error" and "message" when ok is false. */
#define CTLPROTO_KEY_OK "ok"
#define CTLPROTO_KEY_ERROR "error"
#define CTLPROTO_KEY_MESSAGE "message"

/* What the daemon answers when it cannot build its answer. */
#define CTLPROTO_OOM_RESPONSE                                                  \
	"{\"ok\": false, \"error\": \"ENOMEM\", \"message\": \"out of "        \
	"memory\"}\n"

/*
 * Replaces the text of b by the error response for err (a -errno):
 * {"ok": false, "error": "ENAME" ("EIO" when err has no name), "message":
 * msg, or strerror() when msg is NULL} and LF. When b->oom is set after
 * this, answer CTLPROTO_OOM_RESPONSE instead.
 */
void ctlproto_error(struct tbuf *b, int err, const char *msg);

/*
 * A JSON object, flattened: nested keys are joined with '.', array
 * elements numbered ("a.b", "a.0"). As much JSON as kvfs writes.
 */
struct ctlproto_kv {
	char *key;
	char *val; /* decoded string, number text, "true"/"false"; NULL: null */
	int is_str;
};
struct ctlproto_json {
	struct ctlproto_kv *v;
	size_t n;
	size_t cap;
};

/* Parses one JSON object; 0 or -EINVAL/-ENOMEM. Free with ..._free(). */
int ctlproto_json_parse(const char *text, struct ctlproto_json *out);
void ctlproto_json_free(struct ctlproto_json *j);
/* The value of key, NULL when absent or null. Borrowed from j. */
const char *ctlproto_json_get(const struct ctlproto_json *j, const char *key);
/* The value of key as a number: 0, or -ENOENT when absent, null or not one. */
int ctlproto_json_u64(const struct ctlproto_json *j, const char *key,
		      uint64_t *out);
/* Whether key is the boolean true. */
int ctlproto_json_true(const struct ctlproto_json *j, const char *key);

/*
 * Parses a response: 0 when "ok" is true, 1 when it is false (the daemon's
 * error: CTLPROTO_KEY_ERROR and CTLPROTO_KEY_MESSAGE), -EBADMSG when the
 * text is not a JSON object with a boolean "ok", -ENOMEM. On 0 and 1, free
 * *out with ctlproto_json_free(); on errors there is nothing to free.
 */
int ctlproto_response_parse(const char *text, struct ctlproto_json *out);

/* --- metrics: MOUNTPOINT/.kvfs/stats ---------------------------------- */

/* Every exported name is CTLPROTO_METRIC_PREFIX + the table's name. */
#define CTLPROTO_METRIC_PREFIX "kvfs_"

/*
 * X(ID, name, type, help): the metrics the daemon exports, in the order it
 * writes them. type is the Prometheus "# TYPE" (counter or gauge; counter
 * names end in _total); help is one line.
 */
#define CTLPROTO_METRICS(X)                                                    \
	X(LOOKUP_PROBES, "lookup_probes_total", counter,                       \
	  "Index probes (batches) run by the lookup manager.")                 \
	X(LOOKUP_BATCHED_KEYS, "lookup_batched_keys_total", counter,           \
	  "Names sent to the index in probe batches.")                         \
	X(LOOKUP_COALESCED, "lookup_coalesced_total", counter,                 \
	  "Lookups that joined a probe already queued or running.")            \
	X(LOOKUP_HITS, "lookup_hits_total", counter,                           \
	  "Lookups answered: the name exists.")                                \
	X(LOOKUP_MISSES, "lookup_misses_total", counter,                       \
	  "Lookups answered: the name does not exist.")                        \
	X(LOOKUP_CANCELLED, "lookup_cancelled_total", counter,                 \
	  "Parked lookups interrupted by their caller.")                       \
	X(LOOKUP_PROBE_ERRORS, "lookup_probe_errors_total", counter,           \
	  "Probe batches the index failed.")                                   \
	X(MARKED_MISSES, "marked_misses_total", counter,                       \
	  "Names turned into misses after a failed read.")                     \
	X(STALE_RESULTS, "stale_results_total", counter,                       \
	  "Probe results discarded for an older generation.")                  \
	X(KERNEL_INVALIDATIONS, "kernel_invalidations_total", counter,         \
	  "Kernel cache invalidations sent.")                                  \
	X(VERDICTS, "verdicts", gauge, "Verdicts held.")                       \
	X(QUARANTINED, "quarantined", gauge,                                   \
	  "Names quarantined after a failed read.")                            \
	X(LOOKUPS_PARKED, "lookups_parked", gauge,                             \
	  "Lookups waiting for a probe.")                                      \
	X(DROPPED, "dropped_total", counter,                                   \
	  "Blocks dropped because their record was cut short.")                \
	X(QUARANTINED_TOTAL, "quarantined_total", counter,                     \
	  "Blocks quarantined after a failed read (data kept).")               \
	X(STORE_APPENDS, "store_appends_total", counter,                       \
	  "Records appended to data files.")                                   \
	X(STORE_APPEND_BYTES, "store_append_bytes_total", counter,             \
	  "Bytes appended to data files.")                                     \
	X(STORE_READS, "store_reads_total", counter, "Reads from data files.") \
	X(STORE_READ_BYTES, "store_read_bytes_total", counter,                 \
	  "Bytes read from data files.")                                       \
	X(STORE_FREES, "store_frees_total", counter,                           \
	  "Records freed (holes punched).")                                    \
	X(STORE_FILES_REMOVED, "store_files_removed_total", counter,           \
	  "Data files removed once empty.")                                    \
	X(READ_SHORT_RECORDS, "read_short_records_total", counter,             \
	  "Reads that found a record cut short.")                              \
	X(READ_CHECKSUM_ERRORS, "read_checksum_errors_total", counter,         \
	  "Reads that failed a CRC32C check.")                                 \
	X(IO_ERRORS, "io_errors_total", counter, "Data-file I/O errors.")      \
	X(DISK_ENOSPC, "disk_enospc_total", counter,                           \
	  "Stores refused because the backing disk is full.")                  \
	X(EVICTED, "evicted_total", counter,                                   \
	  "Blocks evicted to stay under the capacity.")                        \
	X(CAPACITY_ENOSPC, "capacity_enospc_total", counter,                   \
	  "Stores refused: capacity reached, nothing evictable.")              \
	X(TMP_REMOVED, "tmp_removed_total", counter,                           \
	  "Stale engine temporary files removed.")                             \
	X(CAPACITY_BYTES, "capacity_bytes", gauge, "Configured capacity.")     \
	X(USED_BYTES, "used_bytes", gauge,                                     \
	  "Physical bytes used by data files and the index.")                  \
	X(DATA_FILES, "data_files", gauge, "Data files.")                      \
	X(DIRTY_BYTES, "dirty_bytes", gauge,                                   \
	  "Memory held by unsaved and queued writes.")                         \
	X(DIRTY_WAITS, "dirty_waits_total", counter,                           \
	  "Writes that waited for the write-behind queue to make room.")       \
	X(DIRTY_WAIT_MS, "dirty_wait_ms_total", counter,                       \
	  "Milliseconds writes spent waiting for room.")                       \
	X(DIRTY_REFUSED, "dirty_refused_total", counter,                       \
	  "Writes refused (EDQUOT): dirty_limit held by open files.")          \
	X(WB_QUEUED_FILES, "wb_queued_files", gauge,                           \
	  "Files closed and queued for saving, not yet committed.")            \
	X(WB_QUEUED_BYTES, "wb_queued_bytes", gauge,                           \
	  "Memory held by files queued for saving.")                           \
	X(WB_QUEUED_PEAK_BYTES, "wb_queued_peak_bytes", gauge,                 \
	  "The most memory queued for saving at once since the mount.")        \
	X(WB_APPENDS, "wb_appends_total", counter,                             \
	  "Records appended by the write-behind writers.")                     \
	X(WB_WRITES, "wb_writes_total", counter,                               \
	  "Writes of those records (small files' records go several to one).") \
	X(WB_COMMITS, "wb_commits_total", counter,                             \
	  "Batches of saves written to the index (in its next commit).")       \
	X(WB_CANCELLED, "wb_cancelled_total", counter,                         \
	  "Queued saves dropped: the file was unlinked or rewritten.")         \
	X(WB_FAILED, "wb_failed_total", counter,                               \
	  "Queued saves that failed: the file went back to its saved state.")  \
	X(INDEX_COMMITS, "index_commits_total", counter,                       \
	  "Index transactions committed (each covers a batch of changes).")    \
	X(INDEX_BATCH, "index_batch_changes", gauge,                           \
	  "Index changes made since its last commit.")                         \
	X(INDEX_LOST, "index_lost_changes_total", counter,                     \
	  "Index changes lost with a batch whose commit failed.")              \
	X(NODES, "nodes", gauge, "Inodes held in memory.")                     \
	X(EXTENT_MADE, "extent_files_made_total", counter,                     \
	  "Files that grew past record_max and became extent files.")          \
	X(EXTENT_WRITE_BYTES, "extent_write_bytes_total", counter,             \
	  "Bytes written in place to extent files.")                           \
	X(EXTENT_READ_BYTES, "extent_read_bytes_total", counter,               \
	  "Bytes read from extent files.")                                     \
	X(PASSTHROUGH_OPENS, "passthrough_opens_total", counter,               \
	  "Opens of extent files the kernel serves from the backing file.")    \
	X(GETXATTRS, "getxattr_requests_total", counter,                       \
	  "GETXATTRs (one per write of a handle without direct_io).")          \
	X(FUSE_REQUESTS, "fuse_requests_total", counter,                       \
	  "FUSE requests received, of every kind (not INIT or INTERRUPT).")    \
	X(WRITE_SWAPPED_BYTES, "write_swapped_bytes_total", counter,           \
	  "WRITE bytes that became file buffer with no copy (a swap).")        \
	X(WRITE_COPIED_BYTES, "write_copied_bytes_total", counter,             \
	  "WRITE bytes copied into file buffers.")                             \
	X(RA_STARTED, "readahead_started_total", counter,                      \
	  "Read-aheads queued by lookup hits (-o prefetch).")                  \
	X(RA_USED, "readahead_used_total", counter,                            \
	  "Read-aheads a READ took instead of reading the data file.")         \
	X(RA_WASTED, "readahead_wasted_total", counter,                        \
	  "Read-aheads dropped unread: budget, or their record went.")         \
	X(RA_FAILED, "readahead_failed_total", counter,                        \
	  "Read-aheads whose read failed (then a failed read of the block).")  \
	X(RA_SKIPPED, "readahead_skipped_total", counter,                      \
	  "Lookup hits not read ahead: read-aheads were going unused.")        \
	X(RA_READ_BYTES, "readahead_read_bytes_total", counter,                \
	  "Bytes read ahead.")                                                 \
	X(RA_BYTES, "readahead_bytes", gauge,                                  \
	  "Memory the read-ahead cache holds (queued and in flight too).")     \
	X(RA_PEAK_BYTES, "readahead_peak_bytes", gauge,                        \
	  "The most memory the read-ahead cache held at once.")                \
	X(RA_PENDING, "readahead_pending", gauge,                              \
	  "Read-aheads queued or being read now.")                             \
	X(RA_BUDGET, "readahead_budget_bytes", gauge,                          \
	  "The read-ahead budget (-o prefetch; 0: off).")                      \
	X(RADOS_REACHABLE, "rados_reachable", gauge,                           \
	  "1 while the shared tier's cluster answers (0: off or down).")       \
	X(RADOS_PUTS_QUEUED, "rados_puts_queued", gauge,                       \
	  "Puts and removals queued for the shared tier.")                     \
	X(RADOS_PUTS, "rados_puts_total", counter,                             \
	  "Blocks put to the shared tier.")                                    \
	X(RADOS_PUT_BYTES, "rados_put_bytes_total", counter,                   \
	  "Bytes put to the shared tier.")                                     \
	X(RADOS_PUT_ERRORS, "rados_put_errors_total", counter,                 \
	  "Puts that failed (the block stays local only).")                    \
	X(RADOS_PUTS_DROPPED, "rados_puts_dropped_total", counter,             \
	  "Puts not queued: the queue was full.")                              \
	X(RADOS_PUT_US, "rados_put_us_total", counter,                         \
	  "Microseconds spent in puts.")                                       \
	X(RADOS_REMOVES, "rados_removes_total", counter,                       \
	  "Objects removed by unlinks and renames.")                           \
	X(RADOS_PROBES, "rados_probes_total", counter,                         \
	  "Directory probes of the shared tier (one round trip each).")        \
	X(RADOS_PROBE_US, "rados_probe_us_total", counter,                     \
	  "Microseconds spent in probes.")                                     \
	X(RADOS_REMOTE_HITS, "rados_remote_hits_total", counter,               \
	  "Names the local index lacked and the shared tier had.")             \
	X(RADOS_REMOTE_MISSES, "rados_remote_misses_total", counter,           \
	  "Names neither tier had.")                                           \
	X(RADOS_PULLS, "rados_pulls_total", counter,                           \
	  "Blocks read from the shared tier and kept locally.")                \
	X(RADOS_PULL_BYTES, "rados_pull_bytes_total", counter,                 \
	  "Bytes pulled from the shared tier.")                                \
	X(RADOS_PULL_US, "rados_pull_us_total", counter,                       \
	  "Microseconds spent in pulls.")                                      \
	X(RADOS_ERRORS, "rados_errors_total", counter,                         \
	  "Failed shared-tier calls.")                                         \
	X(RADOS_SHORT_DROPPED, "rados_short_dropped_total", counter,           \
	  "Provably short objects removed.")                                   \
	X(RADOS_QUARANTINED, "rados_quarantined_total", counter,               \
	  "Names quarantined after a failed pull (object kept).")              \
	X(RADOS_REMOTE_UNLINKS, "rados_remote_unlinks_total", counter,         \
	  "Local names dropped: another machine removed them.")                \
	X(RADOS_SWEEPER, "rados_sweeper", gauge,                               \
	  "1 while this daemon holds the pool's sweeper lease.")               \
	X(RADOS_SWEEPS, "rados_sweeps_total", counter,                         \
	  "Sweeps run as the lease holder.")                                   \
	X(RADOS_SWEPT, "rados_swept_total", counter,                           \
	  "Objects swept, least recently used first.")                         \
	X(RADOS_SWEPT_BYTES, "rados_swept_bytes_total", counter,               \
	  "Bytes swept.")                                                      \
	X(RADOS_USAGE_BYTES, "rados_usage_bytes", gauge,                       \
	  "Bytes in the pool, as the sweeper last counted.")                   \
	X(RADOS_CAPACITY_BYTES, "rados_capacity_bytes", gauge,                 \
	  "The pool's byte budget (0: none).")

enum ctlproto_metric {
#define CTLPROTO_METRIC_ID(id, name, type, help) CTLPROTO_M_##id,
	CTLPROTO_METRICS(CTLPROTO_METRIC_ID)
#undef CTLPROTO_METRIC_ID
		CTLPROTO_NMETRICS
};

struct ctlproto_metric_desc {
	const char *name; /* as exported: "kvfs_lookup_hits_total" */
	const char *type; /* "counter" or "gauge" */
	const char *help;
};

/* The table, indexed by enum ctlproto_metric. */
extern const struct ctlproto_metric_desc ctlproto_metrics[CTLPROTO_NMETRICS];

/*
 * Appends metric m with value v to b as the daemon exports it: its
 * "# HELP", "# TYPE" and sample lines. 0, or -EINVAL for a bad m (nothing
 * appended).
 */
int ctlproto_metric_put(struct tbuf *b, enum ctlproto_metric m, uint64_t v);
/* The metric exported as name ("kvfs_..."), or -1. */
int ctlproto_metric_find(const char *name);

#endif
