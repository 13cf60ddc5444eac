/*
 * flame_profd — unit tests: the daemon's log, its warnings rate-limited
 * by kind. daemon-log.c is included whole, so that the clock can be injected
 * through its static functions.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp-test.h"

#include "daemon-log.c"

static const char *why;
static struct fpd_trust trust;

#define S 1000000ull

static void
reset(void)
{
	memset(limits, 0, sizeof(limits));
	trust.uid = geteuid();
	trust.gid = getegid();
}

/* A log file in a directory of its own: the log's directory must be one
 * no other user can write (/tmp is not). */
static int
tmp_log_path(char *dir, char *path, size_t size)
{
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, size, "%s/log", dir);
	return open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
}

/* One kind's warnings at these times: which are printed, with what
 * count. */
static const struct {
	uint64_t at[8];
	int n;
	bool shown[8];
	uint64_t count[8];	/* withheld, for a line printed */
} sequences[] = {
	/* a burst: the first alone */
	{ { 0, 1, 2, 3 }, 4, { true, false, false, false }, { 0 } },
	/* the next after 10 s carries the count */
	{ { 0, 1, 2, 10 * S }, 4, { true, false, false, true }, { 0, 0, 0, 2 } },
	/* the window runs from the last line printed, not the last seen */
	{ { 0, 9 * S, 10 * S - 1, 10 * S, 15 * S, 20 * S - 1, 20 * S },
	  7, { true, false, false, true, false, false, true },
	  { 0, 0, 0, 2, 0, 0, 2 } },
	/* a slow trickle is never held back */
	{ { 0, 10 * S, 25 * S, 100 * S }, 4, { true, true, true, true }, { 0 } },
};

START_TEST(limit_sequence)
{
	static const char kind[] = "kind %d";

	reset();
	for (int i = 0; i < sequences[_i].n; i++) {
		uint64_t count = 99;
		bool shown = limit_pass(kind, sequences[_i].at[i], &count);

		if (shown != sequences[_i].shown[i])
			ck_abort_msg("warning %d at %llu: %s, want %s", i,
				     (unsigned long long)sequences[_i].at[i],
				     shown ? "shown" : "held back",
				     sequences[_i].shown[i] ? "shown" : "held back");
		if (shown)
			fp_assert_int_eq(count, sequences[_i].count[i]);
	}
}
END_TEST

START_TEST(limit_kinds_apart)
{
	static const char a[] = "a %d", b[] = "b %d";
	uint64_t count;

	reset();
	fp_assert(limit_pass(a, 0, &count));
	fp_assert(limit_pass(b, 1, &count));
	fp_assert(!limit_pass(a, 2, &count));
	fp_assert(!limit_pass(b, 3, &count));
	fp_assert(limit_pass(a, 10 * S, &count));
	fp_assert_int_eq(count, 1);
	fp_assert(!limit_pass(b, 10 * S, &count));
}
END_TEST

/* One kind of warning, for two nodes of a run: each node's is limited
 * apart from the other's. */
START_TEST(limit_nodes_apart)
{
	static const char a[] = "a %d";
	uint64_t count;

	reset();
	fpd_log_set_node("x@h");
	fp_assert(limit_pass(a, 0, &count));
	fpd_log_set_node("y@h");
	fp_assert(limit_pass(a, 1, &count));
	fp_assert(!limit_pass(a, 2, &count));
	fpd_log_set_node("x@h");
	fp_assert(!limit_pass(a, 3, &count));
	fpd_log_set_node(NULL);
	fp_assert(limit_pass(a, 4, &count));
}
END_TEST

/* Reads back what the log file holds, lines as one string. */
static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 16);
	size_t n;

	fp_assert_ptr_nonnull(f);
	n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int
count_lines(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void
log_at(uint64_t now, enum fp_log_priority priority, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static void
log_at(uint64_t now, enum fp_log_priority priority, const char *format, ...)
{
	va_list args;

	va_start(args, format);
	vlog_at(priority, format, args, now);
	va_end(args);
}

/* Warnings of one call site: one line per 10 s, the next one carrying
 * the count; errors and info lines all pass. At close, what no line
 * carried is summed up. */
START_TEST(log_file)
{
	char dir[] = "/tmp/fp-test-log-XXXXXX", path[64];
	int fd = tmp_log_path(dir, path, sizeof(path));
	char *text;

	fp_assert_int_ge(fd, 0);
	close(fd);
	reset();
	fp_assert_int_eq(fpd_log_open(path, 0, 0640, &trust, &why), 0);
	for (int i = 0; i < 5; i++) {
		log_at(i, FP_LOG_WARNING, "rpc failed on %s: %d", "node", i);
		log_at(i, FP_LOG_ERROR, "an error %d", i);
		log_at(i, FP_LOG_INFO, "an info line %d", i);
	}
	log_at(11 * S, FP_LOG_WARNING, "rpc failed on %s: %d", "node", 11);
	for (int i = 0; i < 3; i++)
		log_at(12 * S, FP_LOG_WARNING, "another kind %d", i);
	/* through the library's handler, as libsample logs */
	fp_log(FP_LOG_WARNING, "library %s", "warning");
	fp_log(FP_LOG_WARNING, "library %s", "warning");
	fpd_log_close();

	text = slurp(path);
	fp_assert_int_eq(count_lines(text, "warning: rpc failed on node"), 2);
	fp_assert_int_eq(count_lines(text, "rpc failed on node: 0\n"), 1);
	fp_assert_int_eq(count_lines(text, "rpc failed on node: 11 (and 4 more like this since the last one shown)\n"), 1);
	fp_assert_int_eq(count_lines(text, "error: an error"), 5);
	fp_assert_int_eq(count_lines(text, "info: an info line"), 5);
	fp_assert_int_eq(count_lines(text, "warning: another kind 0\n"), 1);
	fp_assert_int_eq(count_lines(text, "another kind 1"), 0);
	fp_assert_int_eq(count_lines(text, "warning: library warning\n"), 1);
	fp_assert_int_eq(count_lines(text, "warning: 2 more warnings were not shown, like: another kind %d\n"), 1);
	fp_assert_int_eq(count_lines(text, "warning: 1 more warnings were not shown, like: library %s\n"), 1);
	free(text);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* A node's lines start with its tag; the others do not. */
START_TEST(log_node_tag)
{
	char dir[] = "/tmp/fp-test-log-XXXXXX", path[64];
	int fd = tmp_log_path(dir, path, sizeof(path));
	char *text;

	fp_assert_int_ge(fd, 0);
	close(fd);
	reset();
	fp_assert_int_eq(fpd_log_open(path, 0, 0640, &trust, &why), 0);
	fpd_log_set_node("app@h");
	log_at(0, FP_LOG_INFO, "interval: %d", 1);
	fpd_log_set_node(NULL);
	log_at(0, FP_LOG_INFO, "duration reached; %s", "stopping");
	fpd_log_close();

	text = slurp(path);
	fp_assert_int_eq(count_lines(text, "flame_profd info: [app@h] interval: 1\n"), 1);
	fp_assert_int_eq(count_lines(text, "flame_profd info: duration reached; stopping\n"), 1);
	free(text);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* A kind new when every slot is taken evicts the one printed longest
 * ago, its count summed up first. */
START_TEST(limit_full)
{
	static char kinds[LIMIT_KINDS + 1][8];
	char dir[] = "/tmp/fp-test-log-XXXXXX", path[64];
	int fd = tmp_log_path(dir, path, sizeof(path));
	uint64_t count;
	char *text;

	fp_assert_int_ge(fd, 0);
	close(fd);
	reset();
	fp_assert_int_eq(fpd_log_open(path, 0, 0640, &trust, &why), 0);
	for (int i = 0; i <= LIMIT_KINDS; i++)
		snprintf(kinds[i], sizeof(kinds[i]), "k%d", i);
	for (int i = 0; i < LIMIT_KINDS; i++)
		fp_assert(limit_pass(kinds[i], (uint64_t)i + 1, &count));
	fp_assert(!limit_pass(kinds[0], 100, &count));
	fp_assert(limit_pass(kinds[LIMIT_KINDS], 200, &count));
	/* k0 went: its next line is a first again */
	fp_assert(limit_pass(kinds[0], 300, &count));
	fp_assert_int_eq(count, 0);
	fpd_log_close();
	text = slurp(path);
	fp_assert_int_eq(count_lines(text, "1 more warnings were not shown, like: k0\n"), 1);
	free(text);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* --log-file is never opened through a link, nor a FIFO (the open does
 * not wait for a reader), nor a hard link, nor in a directory all users
 * can write; what the path pointed at stays as it was. */
static const char *const refused_logs[] = { "link", "fifo", "hardlink", "dir0777" };

START_TEST(log_file_refused)
{
	char dir[] = "/tmp/fp-test-log-XXXXXX", path[64], victim[64];
	const char *kind = refused_logs[_i];
	int fd = tmp_log_path(dir, path, sizeof(path));
	char *text;

	fp_assert_int_ge(fd, 0);
	close(fd);
	unlink(path);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	fd = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0644);
	fp_assert_int_eq(write(fd, "precious\n", 9), 9);
	close(fd);
	if (strcmp(kind, "link") == 0)
		fp_assert_int_eq(symlink(victim, path), 0);
	else if (strcmp(kind, "fifo") == 0)
		fp_assert_int_eq(mkfifo(path, 0600), 0);
	else if (strcmp(kind, "hardlink") == 0)
		fp_assert_int_eq(link(victim, path), 0);
	else
		fp_assert_int_eq(chmod(dir, 0777), 0);
	reset();
	why = NULL;
	fp_assert_int_lt(fpd_log_open(path, 0, 0640, &trust, &why), 0);
	fp_assert_ptr_nonnull(why);
	fpd_log_close();
	text = slurp(victim);
	fp_assert_str_eq(text, "precious\n");
	free(text);
	unlink(path);
	unlink(victim);
	rmdir(dir);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc;

	tc = tcase_create("limit");
	tcase_add_loop_test(tc, limit_sequence, 0,
			    (int)(sizeof(sequences) / sizeof(sequences[0])));
	tcase_add_test(tc, limit_kinds_apart);
	tcase_add_test(tc, limit_nodes_apart);
	tcase_add_test(tc, log_node_tag);
	tcase_add_test(tc, limit_full);
	tcase_add_test(tc, log_file);
	suite_add_tcase(s, tc);

	tc = tcase_create("log file");
	tcase_add_loop_test(tc, log_file_refused, 0,
			    (int)(sizeof(refused_logs) / sizeof(refused_logs[0])));
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
