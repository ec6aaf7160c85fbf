/* SPDX-License-Identifier: MIT */
/*
 * A growable text buffer and the one JSON string writer of kvfs. The daemon
 * builds its control-file texts and control-socket responses in one, and
 * kvfsctl writes JSON strings with it.
 *
 * A struct tbuf is never left with a NULL buf after tbuf_init(): it starts
 * as a static empty string and stays NUL-terminated after every call. When
 * an allocation fails the oom flag is set and stays set (every later append
 * is ignored, even after tbuf_reset()), so a caller checks it once at the
 * end instead of after every append. Not here: parsing JSON.
 *
 * Not thread-safe: one thread uses a buffer at a time (no lock inside).
 */
#ifndef KVFS_TBUF_H
#define KVFS_TBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

struct tbuf {
	char *buf;  /* NUL-terminated text, never NULL after tbuf_init() */
	size_t len; /* bytes before the NUL */
	size_t cap; /* bytes allocated at buf; 0 while buf is the static "" */
	int oom;    /* an append failed: sticky, the text is incomplete */
};

/* An empty buffer; allocates nothing. */
void tbuf_init(struct tbuf *b);
/* Frees the text; b is empty again (as after tbuf_init, oom cleared). */
void tbuf_release(struct tbuf *b);
/*
 * Hands the text over: a malloc'd NUL-terminated string (its length in
 * *len when len is not NULL) that the caller frees, or NULL when b->oom is
 * set (then nothing is handed over). b is empty again either way.
 */
char *tbuf_detach(struct tbuf *b, size_t *len);
/* Drops the text but keeps the memory (and the oom flag). */
void tbuf_reset(struct tbuf *b);
/* Grows b so it holds n more bytes plus the NUL: 0, or -ENOMEM (oom set). */
int tbuf_reserve(struct tbuf *b, size_t n);

void tbuf_putc(struct tbuf *b, char c);
void tbuf_puts(struct tbuf *b, const char *s);
/* Appends n bytes of p (may hold NUL bytes; the text then has them too). */
void tbuf_write(struct tbuf *b, const void *p, size_t n);
void tbuf_printf(struct tbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tbuf_vprintf(struct tbuf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/*
 * Appends s as a JSON string literal: in double quotes, with '"' and '\\'
 * escaped by a backslash and every byte below 0x20, and 0x7f, as \u00XX
 * (lower-case hex); bytes from 0x80 pass through unchanged (UTF-8 stays
 * as it is, and other bytes are not repaired).
 */
void tbuf_json_str(struct tbuf *b, const char *s);
/*
 * Writes s as a JSON string literal (tbuf_json_str) to f. Returns 0, or
 * -ENOMEM (nothing written), or -EIO when f reports an error.
 */
int tbuf_json_fput(FILE *f, const char *s);

#endif
