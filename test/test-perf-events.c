/*
 * flame_profd — unit tests: the perf sample source (--perf) and its
 * symbol tables, on this very process.
 */
#include <arpa/inet.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fp-test.h"
#include "../daemon/daemon-log.h"
#include "../daemon/perf-pid.h"
#include "../daemon/perf-symbols.h"
#include "../daemon/perf-events.h"

static const struct {
	const char *name;
	const char *module, *function;
	uint32_t arity;
} jit_names[] = {
	{ "$lists:seq/2", "lists", "seq", 2 },
	{ "$lists:seq_loop/3-CodeInfoPrologue", "lists", "seq_loop", 3 },
	{ "$fid_wl:'-busy/1-fun-0-'/1", "fid_wl", "-busy/1-fun-0-", 1 },
	{ "$init:'-collect/2-lc$^0/1-0-'/2-CodeInfoPrologue", "init",
	  "-collect/2-lc$^0/1-0-", 2 },
	{ "$'Elixir.Fid.Wl':call_work/2", "Elixir.Fid.Wl", "call_work", 2 },
	{ "$'a:b':'c\\'d'/0", "a:b", "c'd", 0 },
	{ "$global::apply_fun_shared", "$global", "apply_fun_shared", 0 },
	{ "$zlib::codeHeader", "$zlib", "codeHeader", 0 },
	{ "erts_beamasm:emit", "[jit]", "erts_beamasm:emit", 0 },
	{ "$m:f/x", "[jit]", "$m:f/x", 0 },
	/* not M:F/A: whole, not half unquoted */
	{ "$'caf\xc3\xa9/0", "[jit]", "$'caf\xc3\xa9/0", 0 },
	{ "$'a:b':'unclosed/1", "[jit]", "$'a:b':'unclosed/1", 0 },
	{ "$m:''/1", "[jit]", "$m:''/1", 0 },
	{ "$:f/1", "[jit]", "$:f/1", 0 },
};

START_TEST(split_jit)
{
	char buf[128];
	struct fp_frame f;

	snprintf(buf, sizeof(buf), "%s", jit_names[_i].name);
	fpd_symbols_split_jit(buf, &f);
	fp_assert_str_eq(f.module, jit_names[_i].module);
	fp_assert_str_eq(f.function, jit_names[_i].function);
	fp_assert_int_eq(f.arity, jit_names[_i].arity);
}
END_TEST

__attribute__((noinline)) uint64_t fp_test_spin(uint64_t n);

__attribute__((noinline)) uint64_t
fp_test_spin(uint64_t n)
{
	volatile uint64_t x = 0;

	for (uint64_t i = 0; i < n; i++)
		x += i * i;
	return x;
}

/* A perf map of our own, in a directory of its own; the ELF symbols of
 * the test binary; an address nothing maps. */
START_TEST(symbols)
{
	char dir[] = "/tmp/fp-test-perfmap-XXXXXX", path[128];
	struct fpd_symbols *syms;
	struct fp_frame f;
	FILE *map;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)getpid());
	map = fopen(path, "w");
	fp_assert_ptr_nonnull(map);
	fprintf(map, "0x40001000 100 $fid_wl:call_work/2\n");
	fclose(map);

	syms = fpd_symbols_new(getpid(), dir);
	fpd_symbols_lookup(syms, 0x40001000 + 0x20, &f);
	fp_assert_str_eq(f.module, "fid_wl");
	fp_assert_str_eq(f.function, "call_work");
	fp_assert_int_eq(f.arity, 2);

	/* the map grows as modules load: read again on a miss */
	map = fopen(path, "a");
	fprintf(map, "0x40002000 10 $fid_wl:cast_work/2\n");
	fclose(map);
	fpd_symbols_lookup(syms, 0x40002004, &f);
	fp_assert_str_eq(f.function, "cast_work");

	fpd_symbols_lookup(syms, (uint64_t)(uintptr_t)fp_test_spin + 4, &f);
	fp_assert_str_eq(f.function, "fp_test_spin");
	fp_assert_str_eq(f.module, "test-perf-events");
	fp_assert_int_eq(f.arity, 0);

	fpd_symbols_lookup(syms, 0x10, &f);
	fp_assert_str_eq(f.module, "[unknown]");
	fpd_symbols_destroy(syms);

	unlink(path);
	rmdir(dir);
}
END_TEST

/* ---- the perf map, as another user or an odd application makes it ---- */

static const struct {
	const char *line;
	bool ok;
	uint64_t start, size;
	const char *name;
} map_lines[] = {
	{ "7f0a2c0c1a40 58 $lists:seq/2", true, 0x7f0a2c0c1a40, 0x58, "$lists:seq/2" },
	{ "0x7f0a2c0c1a40 0X58 $lists:seq/2", true, 0x7f0a2c0c1a40, 0x58, "$lists:seq/2" },
	{ "7F0A2C0C1A40 58 a name", true, 0x7f0a2c0c1a40, 0x58, "a name" },
	{ "400000 4000000 largest", true, 0x400000, 0x4000000, "largest" },
	{ "", false, 0, 0, NULL },
	{ "garbage", false, 0, 0, NULL },
	{ "7f0a2c0c1a40 58", false, 0, 0, NULL },
	{ "7f0a2c0c1a40 58 ", false, 0, 0, NULL },
	{ "7f0a2c0c1a40  58 n", false, 0, 0, NULL },
	{ "7f0a2c0c1a40\t58 n", false, 0, 0, NULL },
	{ " 7f0a2c0c1a40 58 n", false, 0, 0, NULL },
	{ "-7f0a2c0c1a40 58 n", false, 0, 0, NULL },
	{ "7f0a2c0c1a4g 58 n", false, 0, 0, NULL },
	{ "0x 58 n", false, 0, 0, NULL },
	{ "17f0a2c0c1a400000 10 seventeen-digits", false, 0, 0, NULL },
	/* catch-alls and ranges no code has */
	{ "0 ffffffffffffffff everything", false, 0, 0, NULL },
	{ "10000 ffffffffffff most", false, 0, 0, NULL },
	{ "400000 4000001 too-large", false, 0, 0, NULL },
	{ "7f0a2c0c1a40 0 empty", false, 0, 0, NULL },
	{ "ff00 10 below-mmap-min-addr", false, 0, 0, NULL },
	{ "100000000000000 10 past-user-space", false, 0, 0, NULL },
	{ "fffffffffffff0 20 wraps-out", false, 0, 0, NULL },
};

START_TEST(map_line)
{
	const char *line = map_lines[_i].line, *name = NULL;
	uint64_t start = 0, size = 0;
	size_t name_len = 0;
	bool ok;

	ok = fpd_perf_map_line(line, strlen(line), &start, &size, &name, &name_len);
	fp_assert_int_eq(ok, map_lines[_i].ok);
	if (!ok)
		return;
	fp_assert(start == map_lines[_i].start);
	fp_assert(size == map_lines[_i].size);
	fp_assert_int_eq(name_len, strlen(map_lines[_i].name));
	fp_assert(memcmp(name, map_lines[_i].name, name_len) == 0);
}
END_TEST

START_TEST(map_line_nul)
{
	static const char line[] = "7f0a2c0c1a40 58 a\0b";
	const char *name;
	uint64_t start, size;
	size_t name_len;

	fp_assert(!fpd_perf_map_line(line, sizeof(line) - 1, &start, &size,
				     &name, &name_len));
	fp_assert(fpd_perf_map_line(line, sizeof(line) - 3, &start, &size,
				    &name, &name_len));
}
END_TEST

static const struct {
	const char *in, *out;
	size_t fixed;
} utf8_cases[] = {
	{ "abc", "abc", 0 },
	{ "\xc3\xa9t\xc3\xa9", "\xc3\xa9t\xc3\xa9", 0 },
	{ "\xf0\x9f\x94\xa5", "\xf0\x9f\x94\xa5", 0 },
	{ "\xef\xbf\xbd", "\xef\xbf\xbd", 0 },
	{ "\xff", "?", 1 },
	{ "a\x80" "b", "a?b", 1 },
	{ "\xc3", "?", 1 },
	{ "\xc3(", "?(", 1 },
	{ "\xe2\x82", "??", 2 },
	{ "\xc0\xaf", "??", 2 },			/* overlong '/' */
	{ "\xe0\x80\xaf", "???", 3 },			/* overlong '/' */
	{ "\xed\xa0\x80", "???", 3 },			/* a surrogate */
	{ "\xf4\x90\x80\x80", "????", 4 },		/* past U+10FFFF */
	{ "\xf8\x88\x80\x80\x80", "?????", 5 },
	{ "x\xe2\x82\xac\xe2\x82", "x\xe2\x82\xac??", 2 },
};

START_TEST(utf8_fix)
{
	char buf[32];
	size_t len = strlen(utf8_cases[_i].in);

	memcpy(buf, utf8_cases[_i].in, len + 1);
	fp_assert_int_eq(fpd_utf8_fix(buf, len), utf8_cases[_i].fixed);
	fp_assert_str_eq(buf, utf8_cases[_i].out);
}
END_TEST

/* A directory standing for /tmp, the daemon's log in a file, and the
 * map's path in it for this process. */
struct map_fixture {
	char dir[64], path[128], log[128];
};

static void
map_fixture_open(struct map_fixture *fx)
{
	int fd;

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/fp-test-perfmap-XXXXXX");
	fp_assert_ptr_nonnull(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/perf-%d.map", fx->dir, (int)getpid());
	/* in the test's own directory: a log in /tmp (1777) is refused */
	snprintf(fx->log, sizeof(fx->log), "%s/log", fx->dir);
	fd = open(fx->log, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	fp_assert_int_ge(fd, 0);
	close(fd);
	fp_assert_int_eq(fpd_log_open(fx->log, 0, 0600,
				      &(struct fpd_trust){ geteuid(), getegid() },
				      &(const char *){ NULL }), 0);
}

static void
map_write(const char *path, const char *text, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	fp_assert_int_ge(fd, 0);
	fp_assert_int_eq(write(fd, text, len), (ssize_t)len);
	fp_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

/* Whether the log holds @text; without a fork per test (CK_FORK=no,
 * valgrind) the log holds back a warning another test gave: yes then. */
static bool
log_has(const struct map_fixture *fx, const char *text)
{
	char buf[8192];
	const char *fork = getenv("CK_FORK");
	ssize_t n;
	int fd;

	if (fork && strcmp(fork, "no") == 0)
		return true;
	fd = open(fx->log, O_RDONLY | O_CLOEXEC);
	fp_assert_int_ge(fd, 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	fp_assert_int_ge(n, 0);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

static void
map_fixture_close(struct map_fixture *fx)
{
	fpd_log_close();
	unlink(fx->log);
	unlink(fx->path);
	fp_assert_int_eq(rmdir(fx->dir), 0);
}

static void
assert_unnamed(struct fpd_symbols *syms, uint64_t addr)
{
	struct fp_frame f;

	fpd_symbols_lookup(syms, addr, &f);
	fp_assert_str_eq(f.module, "[unknown]");
	fp_assert_str_eq(f.function, "[unknown]");
}

static const char victim_text[] = "40001000 100 $victim:secret/0\n";

static bool
can_chown(void)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "not root: files of another user cannot be made here: not run\n");
	return false;
}

/* A link another user planted, to a file only root can read: not
 * followed, not one of its lines taken. */
START_TEST(map_symlink)
{
	char victim[] = "/tmp/fp-test-victim-XXXXXX";
	struct map_fixture fx;
	struct fpd_symbols *syms;
	int fd;

	if (!can_chown())
		return;
	map_fixture_open(&fx);
	fd = mkstemp(victim);
	fp_assert_int_ge(fd, 0);
	fp_assert_int_eq(write(fd, victim_text, sizeof(victim_text) - 1),
			 (ssize_t)sizeof(victim_text) - 1);
	fp_assert_int_eq(fchmod(fd, 0600), 0);
	close(fd);
	fp_assert_int_eq(symlink(victim, fx.path), 0);
	fp_assert_int_eq(lchown(fx.path, 65534, 65534), 0);

	syms = fpd_symbols_new(getpid(), fx.dir);
	assert_unnamed(syms, 0x40001010);
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "it is a symbolic link"));

	unlink(victim);
	map_fixture_close(&fx);
}
END_TEST

/* A hard link another user made (fs.protected_hardlinks=0) to a file
 * only root can read: owned by root, and still not the map. */
START_TEST(map_hardlink)
{
	char victim[] = "/tmp/fp-test-victim-XXXXXX";
	struct map_fixture fx;
	struct fpd_symbols *syms;
	int fd;

	map_fixture_open(&fx);
	fd = mkstemp(victim);
	fp_assert_int_ge(fd, 0);
	fp_assert_int_eq(write(fd, victim_text, sizeof(victim_text) - 1),
			 (ssize_t)sizeof(victim_text) - 1);
	fp_assert_int_eq(fchmod(fd, 0600), 0);
	close(fd);
	fp_assert_int_eq(link(victim, fx.path), 0);

	syms = fpd_symbols_new(getpid(), fx.dir);
	assert_unnamed(syms, 0x40001010);
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "it has other hard links"));

	unlink(victim);
	map_fixture_close(&fx);
}
END_TEST

/* A map of another user than the process's (the test's: root), and one
 * anyone may write. */
START_TEST(map_owner)
{
	struct map_fixture fx;
	struct fpd_symbols *syms;

	if (!can_chown())
		return;
	map_fixture_open(&fx);
	map_write(fx.path, victim_text, sizeof(victim_text) - 1, 0644);
	fp_assert_int_eq(chown(fx.path, 65534, 65534), 0);
	syms = fpd_symbols_new(getpid(), fx.dir);
	assert_unnamed(syms, 0x40001010);
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "it is owned by another user than the node's"));

	fp_assert_int_eq(chown(fx.path, 0, 0), 0);
	fp_assert_int_eq(chmod(fx.path, 0666), 0);
	syms = fpd_symbols_new(getpid(), fx.dir);
	assert_unnamed(syms, 0x40001010);
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "it is writable by others"));

	/* the same file, the process's own: read */
	fp_assert_int_eq(chmod(fx.path, 0644), 0);
	syms = fpd_symbols_new(getpid(), fx.dir);
	struct fp_frame f;
	fpd_symbols_lookup(syms, 0x40001010, &f);
	fp_assert_str_eq(f.function, "secret");
	fpd_symbols_destroy(syms);
	map_fixture_close(&fx);
}
END_TEST

/* A FIFO no one writes to: refused at once (the test's timeout would
 * end a read that blocks). */
START_TEST(map_fifo)
{
	struct map_fixture fx;
	struct fpd_symbols *syms;

	map_fixture_open(&fx);
	fp_assert_int_eq(mkfifo(fx.path, 0644), 0);
	syms = fpd_symbols_new(getpid(), fx.dir);
	assert_unnamed(syms, 0x40001010);
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "it is not a regular file"));
	map_fixture_close(&fx);
}
END_TEST

/* A 100 GiB sparse map: read up to FPD_PERF_MAP_MAX, in memory that
 * does not follow the file's size (it would not fit). */
START_TEST(map_sparse)
{
	static const char late[] = "\n40002000 10 $m:late/0\n";
	struct map_fixture fx;
	struct fpd_symbols *syms;
	struct fp_frame f;
	int fd;

	map_fixture_open(&fx);
	map_write(fx.path, "40001000 100 $m:first/0\n", 24, 0644);
	fd = open(fx.path, O_WRONLY | O_CLOEXEC);
	fp_assert_int_ge(fd, 0);
	if (ftruncate(fd, (off_t)100 << 30) < 0) {
		fprintf(stderr, "map_sparse: no 100 GiB sparse file here (%s): not run\n",
			strerror(errno));
		close(fd);
		fpd_log_close();
		unlink(fx.log);
		unlink(fx.path);
		rmdir(fx.dir);
		return;
	}
	/* a line past the cap */
	fp_assert_int_eq(pwrite(fd, late, sizeof(late) - 1,
				(off_t)FPD_PERF_MAP_MAX + (1 << 20)),
			 (ssize_t)sizeof(late) - 1);
	close(fd);

	syms = fpd_symbols_new(getpid(), fx.dir);
	fpd_symbols_lookup(syms, 0x40001010, &f);
	fp_assert_str_eq(f.function, "first");
	for (int i = 0; i < 16; i++)
		assert_unnamed(syms, 0x40002004);
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "is larger than 64 MiB: read up to there"));
	map_fixture_close(&fx);
}
END_TEST

/* Names that are not UTF-8 are made so; the writer then escapes them as
 * any node text. */
START_TEST(map_utf8)
{
	static const char text[] = "40001000 100 $m\xff:f\xc3/1\n"
				   "40002000 100 $'caf\xc3\xa9':g/0\n";
	struct map_fixture fx;
	struct fpd_symbols *syms;
	struct fp_frame f;

	map_fixture_open(&fx);
	map_write(fx.path, text, sizeof(text) - 1, 0644);
	syms = fpd_symbols_new(getpid(), fx.dir);
	fpd_symbols_lookup(syms, 0x40001010, &f);
	fp_assert_str_eq(f.module, "m?");
	fp_assert_str_eq(f.function, "f?");
	fp_assert_int_eq(f.arity, 1);
	fpd_symbols_lookup(syms, 0x40002010, &f);
	fp_assert_str_eq(f.module, "caf\xc3\xa9");
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "names that are not UTF-8"));
	map_fixture_close(&fx);
}
END_TEST

/* Catch-all lines: the whole address space (refused), and a range over
 * this program's own text (the ELF symbols win). */
START_TEST(map_catch_all)
{
	uint64_t text = (uint64_t)(uintptr_t)fp_test_spin;
	struct map_fixture fx;
	struct fpd_symbols *syms;
	struct fp_frame f;
	char lines[256];
	int n;

	map_fixture_open(&fx);
	n = snprintf(lines, sizeof(lines),
		     "0 ffffffffffffffff $evil:all/0\n"
		     "%llx 100000 $evil:text/0\n",
		     (unsigned long long)((text & ~0xffffull) - 0x10000));
	map_write(fx.path, lines, (size_t)n, 0644);
	syms = fpd_symbols_new(getpid(), fx.dir);
	fpd_symbols_lookup(syms, text + 4, &f);
	fp_assert_str_eq(f.function, "fp_test_spin");
	fp_assert_str_eq(f.module, "test-perf-events");
	assert_unnamed(syms, 0x40001010);
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "lines not of the form"));
	map_fixture_close(&fx);
}
END_TEST

/* Lines of odd shapes among good ones; a line too long; a last line not
 * finished yet (taken once it is). */
START_TEST(map_odd_lines)
{
	struct map_fixture fx;
	struct fpd_symbols *syms;
	struct fp_frame f;
	char text[8192];
	size_t len = 0;
	int fd;

	map_fixture_open(&fx);
	len += (size_t)sprintf(text + len, "40001000 10 $m:a/0\n"
					   "garbage\n"
					   "40003000 10\n"
					   "\n"
					   "40003000 10 $m:b\x01\x1b[2J/0\n"
					   "40004000 10 ");
	memset(text + len, 'x', 5000);
	len += 5000;
	len += (size_t)sprintf(text + len, "\n40005000 10 $m:c/0\n40006000 10 $m:d/0");
	map_write(fx.path, text, len, 0644);

	syms = fpd_symbols_new(getpid(), fx.dir);
	fpd_symbols_lookup(syms, 0x40001004, &f);
	fp_assert_str_eq(f.function, "a");
	/* taken whole: the writer escapes what the file's grammar needs */
	fpd_symbols_lookup(syms, 0x40003004, &f);
	fp_assert_str_eq(f.function, "b\x01\x1b[2J");
	assert_unnamed(syms, 0x40004004);
	fpd_symbols_lookup(syms, 0x40005004, &f);
	fp_assert_str_eq(f.function, "c");
	assert_unnamed(syms, 0x40006004);
	fd = open(fx.path, O_WRONLY | O_APPEND | O_CLOEXEC);
	fp_assert_int_ge(fd, 0);
	fp_assert_int_eq(write(fd, "\n", 1), 1);
	close(fd);
	fpd_symbols_lookup(syms, 0x40006004, &f);
	fp_assert_str_eq(f.function, "d");
	/* a frame handed out before keeps its name while the map grows */
	fpd_symbols_lookup(syms, 0x40001004, &f);
	fd = open(fx.path, O_WRONLY | O_APPEND | O_CLOEXEC);
	fp_assert_int_ge(fd, 0);
	for (int i = 0; i < 20000; i++)
		dprintf(fd, "%x 10 $m:more_%d/0\n", 0x50000000 + 16 * i, i);
	close(fd);
	struct fp_frame g;
	fpd_symbols_lookup(syms, 0x50000000 + 16 * 19999, &g);
	fp_assert_str_eq(g.function, "more_19999");
	fp_assert_str_eq(f.function, "a");
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "lines not of the form"));
	map_fixture_close(&fx);
}
END_TEST

/* The map swapped for another file after it was read: no more is read. */
START_TEST(map_replaced)
{
	static const char more[] = "40001000 10 $m:a/0\n40002000 10 $m:b/0\n";
	char other[160];
	struct map_fixture fx;
	struct fpd_symbols *syms;
	struct fp_frame f;

	map_fixture_open(&fx);
	map_write(fx.path, more, 19, 0644);
	syms = fpd_symbols_new(getpid(), fx.dir);
	fpd_symbols_lookup(syms, 0x40001004, &f);
	fp_assert_str_eq(f.function, "a");
	snprintf(other, sizeof(other), "%s/other", fx.dir);
	map_write(other, more, sizeof(more) - 1, 0644);
	fp_assert_int_eq(rename(other, fx.path), 0);
	assert_unnamed(syms, 0x40002004);
	fpd_symbols_lookup(syms, 0x40001004, &f);
	fp_assert_str_eq(f.function, "a");
	fpd_symbols_destroy(syms);
	fp_assert(log_has(&fx, "is another file than the one read so far"));
	map_fixture_close(&fx);
}
END_TEST

/* An ELF file the node's user made and mapped executable (a NIF): section
 * headers whose offset and size wrap past the end, and a 50 GiB symbol
 * table in a sparse file. Named by the file, without symbols; not read
 * out of bounds, not allocated whole. */
START_TEST(elf_hostile)
{
	static const struct {
		uint64_t str_off, str_size, sym_off, sym_size, file_size;
	} shapes[] = {
		{ 0xffffffffffffff00ull, 0x200, 0, 0x200, 4096 },
		{ 0, 16, 0xffffffffffffff00ull, 0x1000, 4096 },
		{ 0, 16, 4096, 50ull << 30, 100ull << 30 },
	};
	char dir[] = "/tmp/fp-test-elf-XXXXXX", path[128];
	struct fpd_symbols *syms;
	struct fp_frame f;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/libhostile.so", dir);
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
		struct {
			Elf64_Ehdr eh;
			Elf64_Phdr ph;
			Elf64_Shdr sh[2];
		} elf = {
			.eh = {
				.e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3,
					     ELFCLASS64, ELFDATA2LSB, EV_CURRENT },
				.e_type = ET_DYN, .e_machine = EM_X86_64,
				.e_version = EV_CURRENT,
				.e_phoff = offsetof(__typeof__(elf), ph), .e_phnum = 1,
				.e_shoff = offsetof(__typeof__(elf), sh), .e_shnum = 2,
				.e_ehsize = sizeof(Elf64_Ehdr),
				.e_phentsize = sizeof(Elf64_Phdr),
				.e_shentsize = sizeof(Elf64_Shdr),
			},
			.ph = { .p_type = PT_LOAD, .p_flags = PF_R | PF_X,
				.p_filesz = 4096, .p_memsz = 4096 },
			.sh = {
				{ .sh_type = SHT_STRTAB, .sh_offset = shapes[c].str_off,
				  .sh_size = shapes[c].str_size },
				{ .sh_type = SHT_SYMTAB, .sh_link = 0,
				  .sh_offset = shapes[c].sym_off,
				  .sh_size = shapes[c].sym_size,
				  .sh_entsize = sizeof(Elf64_Sym) },
			},
		};
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
		void *code;

		fp_assert_int_ge(fd, 0);
		fp_assert_int_eq(write(fd, &elf, sizeof(elf)), (ssize_t)sizeof(elf));
		if (ftruncate(fd, (off_t)shapes[c].file_size) < 0) {
			fprintf(stderr, "elf_hostile: no sparse file of %llu bytes here: not run\n",
				(unsigned long long)shapes[c].file_size);
			close(fd);
			continue;
		}
		code = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		close(fd);
		if (code == MAP_FAILED) {
			fprintf(stderr, "elf_hostile: cannot map %s executable (%s): not run\n",
				path, strerror(errno));
			break;
		}
		syms = fpd_symbols_new(getpid(), dir);
		fpd_symbols_lookup(syms, (uint64_t)(uintptr_t)code + 16, &f);
		fp_assert_str_eq(f.module, "libhostile.so");
		fp_assert_str_eq(f.function, "[unknown]");
		fpd_symbols_destroy(syms);
		munmap(code, 4096);
	}
	unlink(path);
	fp_assert_int_eq(rmdir(dir), 0);
}
END_TEST

static volatile int spinning;

/*
 * Called through a pointer the compiler cannot see through: at -O3 gcc
 * would otherwise clone fp_test_spin() for the constant argument
 * (fp_test_spin.constprop.0), and the samples would name the clone.
 */
static uint64_t (*volatile spin_fn)(uint64_t) = fp_test_spin;

/* the CPU time the spinner had, when it stopped */
static struct timespec spin_cpu;

static void *
spinner(void *arg)
{
	pid_t *tid = arg;

	/* a thread name that is not UTF-8, as a NIF may set */
	pthread_setname_np(pthread_self(), "fp\xffspin");
	__atomic_store_n(tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	while (__atomic_load_n(&spinning, __ATOMIC_RELAXED))
		spin_fn(100000);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spin_cpu);
	return NULL;
}

struct seen {
	unsigned samples, in_spin, in_thread, bad;
	pid_t tid;
	uint64_t last_us;
};

static int
count(void *data, const struct fp_sample *s)
{
	struct seen *seen = data;

	seen->samples++;
	if (s->status != FP_STATUS_CPU || s->pid.num != 0 || !s->label ||
	    s->time_us < seen->last_us)
		seen->bad++;
	seen->last_us = s->time_us;
	if (s->pid.serial == (uint32_t)seen->tid) {
		seen->in_thread++;
		if (!s->label || strcmp(s->label, "fp?spin") != 0)
			seen->bad++;
	}
	for (uint32_t i = 0; i < s->nframes; i++) {
		if (strcmp(s->frames[i].function, "fp_test_spin") == 0 &&
		    s->pid.serial == (uint32_t)seen->tid) {
			seen->in_spin++;
			break;
		}
	}
	return 0;
}

/* valgrind runs a program through its preloaded core */
static bool
under_valgrind(void)
{
	const char *preload = getenv("LD_PRELOAD");

	return preload && strstr(preload, "vgpreload");
}

/* The thread starts after the source: found by the rescan. */
START_TEST(live)
{
	struct fpd_perf_events_config c = { .pid = getpid(), .freq = 999 };
	struct fpd_perf_events *src;
	struct seen seen = { 0 };
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	pthread_t th;
	int rc;

	rc = fpd_perf_events_new(&c, &src);
	if (rc == -EACCES || rc == -EPERM || rc == -ENOSYS || rc == -ENOENT ||
	    rc == -EOPNOTSUPP) {
		fprintf(stderr, "live: perf events unavailable here (%s): not run\n",
			strerror(-rc));
		return;
	}
	fp_assert_int_eq(rc, 0);
	fp_assert(fpd_perf_events_fd(src) >= 0);
	unsigned before = fpd_perf_events_threads(src);

	spinning = 1;
	fp_assert_int_eq(pthread_create(&th, NULL, spinner, &seen.tid), 0);
	/* 1.2 s: the rescan (once a second) opens the new thread */
	for (int i = 0; i < 24; i++) {
		nanosleep(&pause, NULL);
		rc = fpd_perf_events_read(src, 0, count, &seen);
		fp_assert_int_ge(rc, 0);
		if (i == 11)
			fp_assert_int_eq(fpd_perf_events_threads(src), before + 1);
	}
	spinning = 0;
	pthread_join(th, NULL);
	fp_assert_int_eq(seen.bad, 0);
	/* ~1 s of one spinning thread at 999 Hz, as much of it as the
	 * machine gave the thread (a loaded one gives it little: a fifth of
	 * what its CPU time would give, at most 200); under valgrind the
	 * code that runs is its translation, in no file mapping: the
	 * thread's samples are there, not named fp_test_spin */
	double cpu_s = (double)spin_cpu.tv_sec + spin_cpu.tv_nsec / 1e9;
	unsigned want = (unsigned)(cpu_s * 999 / 5);

	if (want > 200)
		want = 200;
	if (want < 1)
		want = 1;
	if (under_valgrind())
		fp_assert_int_ge(seen.in_thread, want / 2);
	else
		fp_assert_int_ge(seen.in_spin, want);
	fpd_perf_events_destroy(src);
}
END_TEST

START_TEST(refused)
{
	struct fpd_perf_events_config c = { .pid = getpid(), .freq = 0 };
	struct fpd_perf_events *src;

	fp_assert_int_eq(fpd_perf_events_new(&c, &src), -EINVAL);
	fp_assert_ptr_null(src);
	c = (struct fpd_perf_events_config){ .pid = 0x3ffffff, .freq = 99 };
	fp_assert_int_eq(fpd_perf_events_new(&c, &src), -ESRCH);
	fpd_perf_events_destroy(NULL);
}
END_TEST

/* Command lines as /proc gives them (arguments NUL-separated, spaces
 * here), the node's name, whether it has a perf map. */
static const struct {
	const char *args;
	const char *node;
	bool map;
	enum fpd_perf_pid_state want;
} pid_cases[] = {
	/* erl -sname, as beam.smp gets it from erlexec */
	{ "/usr/lib/erlang/erts-13.1.5/bin/beam.smp -- -root /usr/lib/erlang "
	  "-progname erl -- -home /root -- -sname app -noshell",
	  "app@vm", true, FPD_PERF_PID_OK },
	{ "beam.smp -- -- -sname app@vm", "app@vm", true, FPD_PERF_PID_OK },
	{ "beam.smp -- -- -name app@10.0.0.5", "app@10.0.0.5", true, FPD_PERF_PID_OK },
	{ "beam.smp -- -- -name app", "app@host.example.com", true, FPD_PERF_PID_OK },
	/* elixir --sname, and a release, after the -pa lists */
	{ "beam.smp -- -- -pa /usr/lib/elixir/lib/elixir/ebin -noshell -s elixir "
	  "start_cli -sname extest -extra -e IO.puts(1)",
	  "extest@vm", true, FPD_PERF_PID_OK },
	/* no map: not started with +JPperf true */
	{ "beam.smp -- -- -sname app", "app@vm", false, FPD_PERF_PID_NO_MAP },
	/* another node, a prefix of its name, another host */
	{ "beam.smp -- -- -sname other", "app@vm", true, FPD_PERF_PID_OTHER },
	{ "beam.smp -- -- -sname ap", "app@vm", true, FPD_PERF_PID_OTHER },
	{ "beam.smp -- -- -sname app@elsewhere", "app@vm", true, FPD_PERF_PID_OTHER },
	/* the last name given is the one in force */
	{ "beam.smp -- -- -sname app -sname other", "app@vm", true, FPD_PERF_PID_OTHER },
	/* after -extra the words are the program's */
	{ "beam.smp -- -- -noshell -extra -sname app", "app@vm", true, FPD_PERF_PID_OTHER },
	/* no name at all (net_kernel:start/1 at run time), a flag last */
	{ "beam.smp -- -- -noshell", "app@vm", true, FPD_PERF_PID_OTHER },
	{ "beam.smp -- -- -sname", "app@vm", true, FPD_PERF_PID_OTHER },
	/* no such process */
	{ NULL, "app@vm", true, FPD_PERF_PID_NONE },
};

/* @dir/@pid/cmdline holding @args, its words separated by spaces here
 * and by NULs there, as /proc gives them. */
static void
write_cmdline(const char *dir, pid_t pid, const char *args)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d", dir, (int)pid);
	fp_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/%d/cmdline", dir, (int)pid);
	f = fopen(path, "w");
	fp_assert_ptr_nonnull(f);
	for (const char *a = args; *a; a++)
		fputc(*a == ' ' ? '\0' : *a, f);
	fputc('\0', f);
	fclose(f);
}

/* Remove a fake /proc @dir of process @pid with whatever it holds. */
static void
remove_fake_proc(const char *dir, pid_t pid)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	remove(path);
	snprintf(path, sizeof(path), "%s/stat", dir);
	remove(path);
	snprintf(path, sizeof(path), "%s/%d/stat", dir, (int)pid);
	remove(path);
	snprintf(path, sizeof(path), "%s/%d/cmdline", dir, (int)pid);
	remove(path);
	snprintf(path, sizeof(path), "%s/%d", dir, (int)pid);
	remove(path);
	fp_assert_int_eq(rmdir(dir), 0);
}

/* A /proc of one process and a map directory, in a directory of their own. */
START_TEST(perf_pid)
{
	char dir[] = "/tmp/fp-test-perfpid-XXXXXX", path[256];
	const pid_t pid = 4242;
	FILE *f;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	if (pid_cases[_i].args)
		write_cmdline(dir, pid, pid_cases[_i].args);
	if (pid_cases[_i].map) {
		snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
		f = fopen(path, "w");
		fp_assert_ptr_nonnull(f);
		fclose(f);
	}

	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, pid_cases[_i].node, -1),
			 pid_cases[_i].want);

	remove_fake_proc(dir, pid);
}
END_TEST

/* This process, through the real /proc: its command line has no node
 * name. */
START_TEST(perf_pid_self)
{
	fp_assert_int_eq(fpd_perf_pid_check(NULL, NULL, getpid(), "app@vm", -1),
			 FPD_PERF_PID_OTHER);
	fp_assert_int_eq(fpd_perf_pid_check(NULL, NULL, 0x3ffffff, "app@vm", -1),
			 FPD_PERF_PID_NONE);
}
END_TEST

/* A map file @dir/perf-@pid.map last written at @mtime (seconds since
 * the epoch). */
static void
make_map(const char *dir, pid_t pid, time_t mtime)
{
	struct timespec ts[2] = { { mtime, 0 }, { mtime, 0 } };
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fp_assert_int_ge(fd, 0);
	fp_assert_int_eq(futimens(fd, ts), 0);
	close(fd);
}

static void
remove_map(const char *dir, pid_t pid)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	fp_assert_int_eq(unlink(path), 0);
}

/* A listening loopback socket of @family and a connection to it:
 * @lfd, @cfd (the daemon's end) and @afd (the node's end). False when
 * this machine has no loopback of that family. */
static bool
loopback_pair(int family, int *lfd, int *cfd, int *afd)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) :
					    sizeof(struct sockaddr_in6);

	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	*lfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*lfd < 0 || bind(*lfd, (struct sockaddr *)&ss, len) < 0) {
		if (*lfd >= 0)
			close(*lfd);
		return false;
	}
	fp_assert_int_eq(listen(*lfd, 1), 0);
	fp_assert_int_eq(getsockname(*lfd, (struct sockaddr *)&ss, &len), 0);
	*cfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fp_assert_int_ge(*cfd, 0);
	fp_assert_int_eq(connect(*cfd, (struct sockaddr *)&ss, len), 0);
	*afd = accept4(*lfd, NULL, NULL, SOCK_CLOEXEC);
	fp_assert_int_ge(*afd, 0);
	return true;
}

/* A node named at run time has no name on its command line, but holds
 * its end of our connection: a real TCP connection over loopback (IPv4,
 * then IPv6 where the machine has it), whose accepted end this process
 * holds (pid 1 does not, and its command line names no node). */
START_TEST(perf_pid_socket)
{
	static const int families[] = { AF_INET, AF_INET6 };
	char dir[] = "/tmp/fp-test-perfsock-XXXXXX";
	int lfd, cfd, afd;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	make_map(dir, getpid(), time(NULL));
	make_map(dir, 1, time(NULL));
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		if (!loopback_pair(families[f], &lfd, &cfd, &afd)) {
			fp_assert_int_eq(families[f], AF_INET6);
			continue;
		}
		fp_assert_int_eq(fpd_perf_pid_check(NULL, dir, getpid(), "app@vm", cfd),
				 FPD_PERF_PID_OK);
		/* without the connection, the command line decides */
		fp_assert_int_eq(fpd_perf_pid_check(NULL, dir, getpid(), "app@vm", -1),
				 FPD_PERF_PID_OTHER);
		fp_assert_int_eq(fpd_perf_pid_check(NULL, dir, 1, "app@vm", cfd),
				 FPD_PERF_PID_OTHER);
		/* our own end is not the node's: the check looks for the
		 * peer's */
		close(afd);
		fp_assert_int_eq(fpd_perf_pid_check(NULL, dir, getpid(), "app@vm", cfd),
				 FPD_PERF_PID_OTHER);
		close(cfd);
		close(lfd);
	}
	remove_map(dir, getpid());
	remove_map(dir, 1);
	fp_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The VM leaves its map behind: a map last written before the process
 * started is an earlier process's of that pid. The fake /proc gives the
 * process's start (field 22 of stat, clock ticks after boot) and the
 * boot time (btime). */
START_TEST(perf_pid_stale_map)
{
	char dir[] = "/tmp/fp-test-perfstale-XXXXXX", path[256];
	const pid_t pid = 4242;
	const time_t boot = 1700000000;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	write_cmdline(dir, pid, "beam.smp -sname app");
	/* started 1000 s after boot; a command name with ") " in it */
	snprintf(path, sizeof(path), "%s/%d/stat", dir, (int)pid);
	f = fopen(path, "w");
	fp_assert_ptr_nonnull(f);
	fprintf(f, "%d (be) am) S 1 %d %d 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 "
		"30 0 %ld 1000 100\n", (int)pid, (int)pid, (int)pid, 1000 * hz);
	fclose(f);
	snprintf(path, sizeof(path), "%s/stat", dir);
	f = fopen(path, "w");
	fp_assert_ptr_nonnull(f);
	fprintf(f, "cpu  1 2 3 4\nintr 0\nctxt 5\nbtime %lld\nprocesses 9\n",
		(long long)boot);
	fclose(f);

	make_map(dir, pid, boot + 500);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_STALE_MAP);
	make_map(dir, pid, boot + 1000);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_OK);
	make_map(dir, pid, boot + 5000);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_OK);

	remove_fake_proc(dir, pid);
}
END_TEST

/* --perf auto: a map the node's user does not own, a link, a FIFO are
 * no map of its own. */
START_TEST(perf_pid_foreign_map)
{
	char dir[] = "/tmp/fp-test-perfforeign-XXXXXX", path[256];
	const pid_t pid = 4242;

	if (!can_chown())
		return;
	fp_assert_ptr_nonnull(mkdtemp(dir));
	write_cmdline(dir, pid, "beam.smp -sname app");
	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	map_write(path, "", 0, 0644);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_OK);
	fp_assert_int_eq(chown(path, 65534, 65534), 0);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_FOREIGN_MAP);
	/* the node's user owns it: its fake /proc directory says so */
	snprintf(path, sizeof(path), "%s/%d", dir, (int)pid);
	fp_assert_int_eq(chown(path, 65534, 65534), 0);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_OK);
	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	unlink(path);
	fp_assert_int_eq(mkfifo(path, 0644), 0);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_FOREIGN_MAP);
	unlink(path);
	fp_assert_int_eq(symlink("/etc/passwd", path), 0);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_FOREIGN_MAP);
	unlink(path);
	{
		char victim[256];

		snprintf(victim, sizeof(victim), "%s/victim", dir);
		map_write(victim, "", 0, 0600);
		fp_assert_int_eq(link(victim, path), 0);
		fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
				 FPD_PERF_PID_FOREIGN_MAP);
		unlink(victim);
	}

	remove_fake_proc(dir, pid);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("perf-events");
	TCase *tc = tcase_create("symbols");

	tcase_add_loop_test(tc, split_jit, 0,
			    (int)(sizeof(jit_names) / sizeof(jit_names[0])));
	tcase_add_test(tc, symbols);
	suite_add_tcase(s, tc);
	tc = tcase_create("perf map");
	tcase_add_loop_test(tc, map_line, 0,
			    (int)(sizeof(map_lines) / sizeof(map_lines[0])));
	tcase_add_test(tc, map_line_nul);
	tcase_add_loop_test(tc, utf8_fix, 0,
			    (int)(sizeof(utf8_cases) / sizeof(utf8_cases[0])));
	tcase_add_test(tc, map_symlink);
	tcase_add_test(tc, map_hardlink);
	tcase_add_test(tc, map_owner);
	tcase_add_test(tc, map_fifo);
	tcase_add_test(tc, map_sparse);
	tcase_add_test(tc, map_utf8);
	tcase_add_test(tc, map_catch_all);
	tcase_add_test(tc, map_odd_lines);
	tcase_add_test(tc, map_replaced);
	tcase_add_test(tc, elf_hostile);
	suite_add_tcase(s, tc);
	tc = tcase_create("events");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, live);
	tcase_add_test(tc, refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("auto");
	tcase_add_loop_test(tc, perf_pid, 0,
			    (int)(sizeof(pid_cases) / sizeof(pid_cases[0])));
	tcase_add_test(tc, perf_pid_self);
	tcase_add_test(tc, perf_pid_socket);
	tcase_add_test(tc, perf_pid_stale_map);
	tcase_add_test(tc, perf_pid_foreign_map);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
