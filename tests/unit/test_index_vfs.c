/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of index/vfs.c, the index's own SQLite VFS, seen from outside:
 * a cold page read asks the kernel for its whole window (read-around), and
 * a page fetched through the mapping enters its whole window into the page
 * tables, and the mapping asks for huge pages; and SQLite's memory
 * statistics, set off before SQLite's first use, stay off.
 */
#include "test_index_fx.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

/* Files n0 to n19999 in the root, enough for a 2 MiB index. */
static void make_names(struct fx *f)
{
	enum { NAMES = 20000, BATCH = 1000 };
	static char names[BATCH][16];
	const char *ptrs[BATCH];
	static struct idx_attr attrs[BATCH];

	for (int b = 0; b < NAMES / BATCH; b++) {
		for (int i = 0; i < BATCH; i++) {
			snprintf(names[i], sizeof(names[i]), "n%d",
				 b * BATCH + i);
			ptrs[i] = names[i];
			attrs[i] = (struct idx_attr){.mode = S_IFREG | 0644,
						     .nlink = 1,
						     .mtime_ns = NOW};
		}
		assert_int_equal(idx_create_many(f->idx, KV_ROOT_INO, BATCH,
						 ptrs, attrs),
				 BATCH);
	}
}

/*
 * KiB of the file at path mapped into this process (smaps' Rss), or -1;
 * *hg (when not NULL) says whether each of its mappings has VM_HUGEPAGE
 * (VmFlags "hg").
 */
static long mapped_kib(const char *path, int *hg)
{
	char real[PATH_MAX], line[PATH_MAX + 128];
	FILE *fp = fopen("/proc/self/smaps", "r");
	long total = -1, kib;
	int ours = 0;

	if (!fp || !realpath(path, real)) {
		if (fp)
			fclose(fp);
		return -1;
	}
	if (hg)
		*hg = 1;
	while (fgets(line, sizeof(line), fp)) {
		size_t n = strlen(line), m = strlen(real);

		/* A mapping's first line ends with its file's path. */
		if (n > m + 1 && line[n - 1] == '\n' &&
		    line[n - 2 - m] == ' ' &&
		    strncmp(line + n - 1 - m, real, m) == 0) {
			ours = 1;
			total = total < 0 ? 0 : total;
		} else if (ours && sscanf(line, "Rss: %ld kB", &kib) == 1) {
			total += kib;
		} else if (ours && strncmp(line, "VmFlags:", 8) == 0) {
			/* The last field of a mapping's entry. */
			if (hg && !strstr(line, " hg"))
				*hg = 0;
			ours = 0;
		}
	}
	fclose(fp);
	return total;
}

/*
 * A fetch through the index's mapping enters the page's whole 1 MiB window
 * into the page tables at once (vfs.c, idx_map_populate()), where a fault
 * would map 16 pages: one lookup leaves at least a window mapped.
 */
/*
 * Memory statistics off (idx_vfs_init): an index opened, filled and read
 * leaves SQLite's count of its memory at 0, as it stays when nothing is
 * counted; with statistics on it would hold what the connection uses.
 */
static void test_no_memstatus(void **state)
{
	struct fx *f = *state;
	struct idx_attr a;

	make_names(f);
	assert_int_equal(idx_lookup(f->idx, KV_ROOT_INO, "n123", &a), 0);
	assert_true(S_ISREG(a.mode));
	assert_int_equal(sqlite3_memory_used(), 0);
	assert_int_equal(sqlite3_memory_highwater(0), 0);
}

static void test_map_populate(void **state)
{
	struct fx *f = *state;
	struct stat st;
	long kib;

	make_names(f);
	fx_reopen(f);
	assert_int_equal(stat(f->db, &st), 0);
	assert_true(st.st_size >= 2 << 20);
	assert_int_equal(idx_set_mmap(f->idx, 1 << 30), 0);
	assert_true(lookup_ino(f, KV_ROOT_INO, "n12345") > KV_ROOT_INO);
	kib = mapped_kib(f->db, NULL);
	print_message("%ld KiB of a %lld KiB index mapped after a lookup\n",
		      kib, (long long)st.st_size / 1024);
	assert_true(kib >= 1024);
}

/*
 * The index's mapping asks for huge pages (vfs.c, idx_mmap()), so that
 * the kernel may map 2 MiB of it with one page-table entry. Whether it
 * does depends on the file system and free memory; the advice is checked.
 */
static void test_map_hugepage(void **state)
{
	struct fx *f = *state;
	int hg = 0;

	if (access("/sys/kernel/mm/transparent_hugepage", F_OK) != 0) {
		print_message("no transparent huge pages in this kernel\n");
		skip();
	}
	make_names(f);
	fx_reopen(f);
	assert_int_equal(idx_set_mmap(f->idx, 1 << 30), 0);
	assert_true(lookup_ino(f, KV_ROOT_INO, "n12345") > KV_ROOT_INO);
	assert_true(mapped_kib(f->db, &hg) > 0);
	assert_true(hg);
}

/* Pages of the file at path in the page cache, or -1. */
static long resident_pages(const char *path)
{
	long page = sysconf(_SC_PAGESIZE), n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char *vec = NULL;
	struct stat st;
	void *map;

	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -1;
	vec = malloc((size_t)(st.st_size + page - 1) / (size_t)page);
	if (vec && mincore(map, (size_t)st.st_size, vec) == 0)
		for (off_t i = 0; i < (st.st_size + page - 1) / page; i++)
			n += vec[i] & 1;
	else
		n = -1;
	free(vec);
	munmap(map, (size_t)st.st_size);
	return n;
}

/*
 * A database page missing from the page cache is read with the 128 KiB
 * around it (vfs.c): after the file's pages are dropped, one lookup brings
 * back at least a window's worth, where a lookup reads a handful of pages.
 */
static void test_read_around(void **state)
{
	struct fx *f = *state;
	struct statfs sf;
	long before, after = 0;
	int fd;

	make_names(f);
	/* Closing checkpoints: every page is in the database file. */
	fx_reopen(f);
	assert_int_equal(statfs(f->db, &sf), 0);
	fd = open(f->db, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fdatasync(fd), 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	before = resident_pages(f->db);
	if (sf.f_type == TMPFS_MAGIC || before < 0 || before > 8) {
		print_message("cannot drop the file's pages here (%ld left)\n",
			      before);
		skip();
	}
	assert_true(lookup_ino(f, KV_ROOT_INO, "n12345") > KV_ROOT_INO);
	/* The window is read ahead: wait for it to land. */
	for (int i = 0; i < 200 && after < 32; i++) {
		after = resident_pages(f->db);
		usleep(10000);
	}
	print_message("%ld pages cached before the lookup, %ld after\n", before,
		      after);
	assert_true(after >= 32);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_read_around),
		T(test_no_memstatus),
		T(test_map_populate),
		T(test_map_hugepage),
	};

	log_set_level(LOG_LVL_WARN);
	return cmocka_run_group_tests_name("index_vfs", tests, NULL, NULL);
}
