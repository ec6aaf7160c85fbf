/* SPDX-License-Identifier: MIT */
/*
 * Logging: one line per decided event, to stderr in the foreground and to
 * syslog once log_use_syslog() was called. The level check happens before
 * the arguments are evaluated. Safe from any thread; not from a signal
 * handler.
 */
#ifndef KVFS_LOG_H
#define KVFS_LOG_H

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

extern enum log_level log_max_level;

void log_set_level(enum log_level lvl);
/* Parses "err", "warn", "info" or "debug"; returns -EINVAL otherwise. */
int log_parse_level(const char *s, enum log_level *out);
/* Sends later lines to syslog(3) with the given identity (borrowed). */
void log_use_syslog(const char *ident);
/*
 * The last line of a process a fatal signal is ending, from that signal's
 * handler: to stderr with write(2), and to syslog(3) when in use (which is
 * not async-signal-safe; acceptable only because the process dies next).
 */
void log_dying(const char *line);
/* Writes "func: message"; use the log_* macros, which check the level. */
void log_msg(enum log_level lvl, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_at(lvl, ...)                                                       \
	do {                                                                   \
		if ((lvl) <= log_max_level)                                    \
			log_msg((lvl), __func__, __VA_ARGS__);                 \
	} while (0)
#define log_err(...) log_at(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_at(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_at(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_at(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
