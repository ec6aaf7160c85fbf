/* SPDX-License-Identifier: MIT */
/*
 * What the three parts of vllm_io share: the block format (self-identifying
 * 4 KiB pages), the namespace layout, the engine's store/load/start-up
 * sequences with transcript output, and the modes. vllm_io.c holds main,
 * the block format, start-up and the remount phases; vllm_io_seq.c the seq
 * mode; vllm_io_stress.c the stress mode. Single-threaded helpers unless a
 * comment says otherwise; no shared state between threads beyond what
 * vllm_io_stress.c declares.
 */
#ifndef KVFS_TESTS_VLLM_IO_H
#define KVFS_TESTS_VLLM_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PAGE 4096u
#define KiB 1024ul
#define MiB (1024ul * 1024ul)
#define MODEL_DIR "meta-llama_Llama-3.2-1B_5f2d1c9e8a47"
#define MAX_WRITERS 64

/* snprintf that treats truncation as a bug in the test (abort). */
__attribute__((format(printf, 3, 4))) void xsnprintf(char *out, size_t n,
						     const char *fmt, ...);

/* Block contents: every page starts with (magic, key, writer, version,
 * page, size), then a stream derived from those. Thread-safe. */
void fill_block(unsigned char *b, size_t size, uint32_t key, uint32_t writer,
		uint32_t version);
/* 0 when b[0..size) is one whole version of key (its writer and version
 * stored), else -1 with the first bad page described in why. */
int check_block(const unsigned char *b, size_t size, uint32_t key,
		uint32_t *writer, uint32_t *version, char *why, size_t why_len);

/* Key id -> lowercase hex name of hex_len chars (16, 32 or 64). */
void key_hex(uint32_t key, unsigned hex_len, char *out);
/* <root>/<MODEL_DIR>_r0/<hex[0:3]>/<hex[3:5]>_g<group>/<hex>.bin */
void block_path(char *out, size_t n, const char *root, const char *hex,
		unsigned group);

enum { STORED = 0, SKIPPED = 1 };

/* The engine's store (engine.c); check_access=0 models a racing writer
 * that passed access() before another writer's rename landed. The step
 * results go to log. Returns STORED, SKIPPED or -errno. Thread-safe. */
int vstore(const char *dest, const void *buf, size_t size, int direct,
	   unsigned long long suffix, int check_access, char *log,
	   size_t log_len);
/* The engine's load, unlinking on a short read. Returns the byte count or
 * -errno; *shortp set on a short read, *unlink_errp its unlink's errno. */
ssize_t vload(const char *path, void *buf, size_t size, int direct, int *shortp,
	      int *unlink_errp);

/* The engine's config.json (its bytes, without a NUL). */
extern const char config_json[];
/* Engine start-up under root, transcript lines prefixed by tag. Returns
 * 1 when the O_DIRECT probe passed. */
int startup(const char *root, const char *tag);
/* "tag: OK type=T mode=0MMM size=N" or the stat errno. */
void print_stat(const char *tag, const char *path);
/* Loads path and prints whether it is (key, writer, version) whole. */
void seq_load(const char *tag, const char *path, size_t size, int direct,
	      uint32_t key, uint32_t writer, uint32_t version);

/* The modes; each returns main's exit status. */
int do_seq(const char *root);
int do_stress(const char *root, int argc, char **argv);

#endif
