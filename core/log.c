/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr or syslog(3); see log.h. Not here: deciding what is
 * worth a line.
 */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

enum log_level log_max_level = LOG_LVL_INFO;
static int log_syslog;

void log_set_level(enum log_level lvl)
{
	log_max_level = lvl;
}

int log_parse_level(const char *s, enum log_level *out)
{
	static const char *const names[] = {"err", "warn", "info", "debug"};

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void log_use_syslog(const char *ident)
{
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_syslog = 1;
}

void log_dying(const char *line)
{
	size_t len = strlen(line);

	if (write(STDERR_FILENO, line, len) < 0 ||
	    write(STDERR_FILENO, "\n", 1) < 0) {
		/* nowhere else to say it */
	}
	if (log_syslog)
		syslog(LOG_CRIT, "%s", line);
}

void log_msg(enum log_level lvl, const char *func, const char *fmt, ...)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	static const char *const tag[] = {"error", "warning", "info", "debug"};
	char line[1024];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "%s: ", func);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (log_syslog) {
		syslog(prio[lvl], "%s", line);
		return;
	}
	/* One fprintf per line so lines of different threads do not mix. */
	fprintf(stderr, "kvfs: %s: %s\n", tag[lvl], line);
}
