/*
 * flame_profd — unit tests: the control socket (daemon/ctl*.c): the
 * request parser on any bytes, the answers' error codes, and the daemon
 * end served through its source ops on a real socket in a directory of
 * its own (a status, a trigger without a recorder, a request too long,
 * the socket made 0600 and removed again).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fp-test.h"
#include "../daemon/ctl.h"
#include "../daemon/options.h"
#include "../daemon/output.h"
#include "../daemon/recorder.h"
#include "../daemon/source.h"
#include "../daemon/util.h"

static const struct {
	const char *line;
	size_t len;		/* 0: strlen(line) */
	int rc;
	enum fpd_ctl_verb verb;
	const char *reason;
} parse_cases[] = {
	{ "status", 0, 0, FPD_CTL_STATUS, NULL },
	{ "trigger deploy 42", 0, 0, FPD_CTL_TRIGGER, "deploy 42" },
	{ "trigger  two spaces", 0, 0, FPD_CTL_TRIGGER, " two spaces" },
	{ "trigger \x1b[31mred", 0, 0, FPD_CTL_TRIGGER, "\x1b[31mred" },
	{ "trigger x", 0, 0, FPD_CTL_TRIGGER, "x" },
	{ "trigger ", 0, -EINVAL, 0, NULL },
	{ "trigger", 0, -EINVAL, 0, NULL },
	{ "triggerx", 0, -EINVAL, 0, NULL },
	{ "status ", 0, -EINVAL, 0, NULL },
	{ "STATUS", 0, -EINVAL, 0, NULL },
	{ "", 0, -EINVAL, 0, NULL },
	{ "stat\0us", 7, -EINVAL, 0, NULL },
	{ "trigger a\0b", 11, -EINVAL, 0, NULL },
	{ "trigger a\nb", 0, -EINVAL, 0, NULL },
	/* 128 bytes of reason: the most */
	{ "trigger 0123456789012345678901234567890123456789012345678901234567890123"
	  "4567890123456789012345678901234567890123456789012345678901234567", 0, 0,
	  FPD_CTL_TRIGGER,
	  "0123456789012345678901234567890123456789012345678901234567890123"
	  "4567890123456789012345678901234567890123456789012345678901234567" },
	{ "trigger 0123456789012345678901234567890123456789012345678901234567890123"
	  "45678901234567890123456789012345678901234567890123456789012345678", 0,
	  -EINVAL, 0, NULL },
};

START_TEST(parse)
{
	struct fpd_ctl_request req;
	const char *why = NULL;
	size_t len = parse_cases[_i].len ? parse_cases[_i].len :
					   strlen(parse_cases[_i].line);
	int rc = fpd_ctl_parse(parse_cases[_i].line, len, &req, &why);

	fp_assert_int_eq(rc, parse_cases[_i].rc);
	if (rc) {
		fp_assert_ptr_nonnull(why);
		return;
	}
	fp_assert_int_eq(req.verb, parse_cases[_i].verb);
	if (parse_cases[_i].reason)
		fp_assert_str_eq(req.reason, parse_cases[_i].reason);
}
END_TEST

START_TEST(answer_errors)
{
	fp_assert_int_eq(fpd_ctl_answer_error("ok"), FPD_CTL_ERRORS);
	for (int e = 0; e < FPD_CTL_ERRORS; e++) {
		char line[128];

		snprintf(line, sizeof(line), "error: %s some text",
			 fpd_ctl_error_name(e));
		fp_assert_int_eq(fpd_ctl_answer_error(line), e);
	}
	fp_assert_int_eq(fpd_ctl_answer_error("error: capped"), FPD_CTL_ERR_CAPPED);
	fp_assert_int_eq(fpd_ctl_answer_error("error: cappedx y"), -1);
	fp_assert_int_eq(fpd_ctl_answer_error("ok "), -1);
	fp_assert_int_eq(fpd_ctl_answer_error(""), -1);
	fp_assert_int_eq(fpd_ctl_answer_error("error: "), -1);
}
END_TEST

/* ---- the daemon end on a real socket ------------------------------------ */

static int
client(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, FPD_CTL_SOCKET);
	fp_assert_int_ge(fd, 0);
	fp_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Send @req (@len bytes), let @src serve it, return the whole answer. */
static char *
exchange(struct fpd_source *src, const char *dir, const char *req, size_t len)
{
	static char buf[4096];
	int lfd = src->ops->fd(src), fd = client(dir);
	size_t got = 0;
	ssize_t n;

	fp_assert_int_eq(send(fd, req, len, 0), (ssize_t)len);
	src->ops->input(src);	/* accept: the client's connection is polled */
	fp_assert_int_ne(src->ops->fd(src), lfd);
	for (int i = 0; i < 4 && src->ops->fd(src) != lfd; i++)
		src->ops->input(src);	/* read, answer, close */
	fp_assert_int_eq(src->ops->fd(src), lfd);
	while ((n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return buf;
}

START_TEST(serve)
{
	char dir[] = "/tmp/test-ctl.XXXXXX", path[4096], big[700];
	struct fpd_options o;
	struct fpd_output_config oc = {
		.node = "a@b", .header = "# h\n", .options_json = "{}",
		.compress = FPD_COMPRESS_NONE, .rotate_us = 3600000000ull,
		.keep_captures = 1, .file_mode = 0600, .dir_mode = 0700,
		.uid = geteuid(), .gid = getegid(),
	};
	struct fpd_output *out;
	struct fpd_recorder *rec;
	struct fpd_ctl *ctl;
	struct fpd_source *src;
	struct stat st;
	char *a;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	memset(&o, 0, sizeof(o));
	oc.dir = dir;
	fp_assert_int_eq(fpd_output_new(&oc, &out), 0);
	rec = fpd_recorder_new(&o, out);
	{
		struct fpd_ctl_config c = {
			.node = "a@b", .dirfd = fpd_output_dirfd(out),
			.dir = fpd_output_dir(out), .uid = geteuid(),
			.gid = getegid(), .rec = rec,
		};

		fp_assert_int_eq(fpd_ctl_new(&c, &ctl), 0);
	}
	src = fpd_ctl_source(ctl);
	snprintf(path, sizeof(path), "%s/a@b/%s", dir, FPD_CTL_SOCKET);
	fp_assert_int_eq(lstat(path, &st), 0);
	fp_assert(S_ISSOCK(st.st_mode));
	fp_assert_int_eq(st.st_mode & 0777, 0600);
	snprintf(path, sizeof(path), "%s/a@b", dir);

	a = exchange(src, path, "status\n", 7);
	fp_assert(strncmp(a, "ok\nnode: a@b\n", 13) == 0);
	fp_assert_ptr_nonnull(strstr(a, "\nsamples: 0\n"));
	fp_assert_ptr_nonnull(strstr(a, "\nflight_recorder: off\n"));
	a = exchange(src, path, "trigger why\n", 12);
	fp_assert(strncmp(a, "error: no-recorder ", 19) == 0);
	a = exchange(src, path, "bogus\n", 6);
	fp_assert(strncmp(a, "error: request ", 15) == 0);
	memset(big, 'x', sizeof(big));
	a = exchange(src, path, big, sizeof(big));
	fp_assert(strncmp(a, "error: request ", 15) == 0);

	/* a client that says nothing is dropped at the tick after its time */
	{
		int lfd = src->ops->fd(src), fd = client(path);
		char c;

		src->ops->input(src);
		fp_assert_int_ne(src->ops->fd(src), lfd);
		src->ops->tick(src, fpd_now_mono_us() + 2 * FPD_CTL_CLIENT_US);
		fp_assert_int_eq(src->ops->fd(src), lfd);
		fp_assert_int_eq(recv(fd, &c, 1, 0), 0);
		close(fd);
	}

	/* out of descriptors: the listening socket, still readable, is not
	 * polled for a second, then the waiting client is served */
	{
		int lfd = src->ops->fd(src), fd = client(path), low;
		struct rlimit rl, tight;
		char buf[64];

		fp_assert_int_eq(send(fd, "status\n", 7, 0), 7);
		fp_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
		low = dup(0);
		fp_assert_int_ge(low, 0);
		close(low);
		tight = rl;
		tight.rlim_cur = (rlim_t)low;
		fp_assert_int_eq(setrlimit(RLIMIT_NOFILE, &tight), 0);
		src->ops->input(src);
		fp_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
		fp_assert_int_eq(src->ops->fd(src), -1);
		src->ops->tick(src, fpd_now_mono_us());
		fp_assert_int_eq(src->ops->fd(src), -1);
		src->ops->tick(src, fpd_now_mono_us() + 2000000);
		fp_assert_int_eq(src->ops->fd(src), lfd);
		src->ops->input(src);
		fp_assert_int_ne(src->ops->fd(src), lfd);
		for (int i = 0; i < 4 && src->ops->fd(src) != lfd; i++)
			src->ops->input(src);
		fp_assert_int_eq(src->ops->fd(src), lfd);
		fp_assert_int_ge(recv(fd, buf, sizeof(buf), 0), 3);
		fp_assert(strncmp(buf, "ok\n", 3) == 0);
		close(fd);
	}

	/* an earlier run's socket is replaced; anything else is refused */
	fpd_ctl_destroy(ctl);
	snprintf(path, sizeof(path), "%s/a@b/%s", dir, FPD_CTL_SOCKET);
	fp_assert_int_eq(lstat(path, &st), -1);
	fp_assert_int_eq(symlinkat("/etc/passwd", fpd_output_dirfd(out),
				   FPD_CTL_SOCKET), 0);
	{
		struct fpd_ctl_config c = {
			.node = "a@b", .dirfd = fpd_output_dirfd(out),
			.dir = fpd_output_dir(out), .uid = geteuid(),
			.gid = getegid(), .rec = rec,
		};

		fp_assert_int_eq(fpd_ctl_new(&c, &ctl), -EPERM);
		fp_assert_ptr_null(ctl);
	}
	fpd_recorder_destroy(rec);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	fp_assert_int_eq(system(path), 0);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("ctl");
	TCase *tc = tcase_create("protocol");

	tcase_add_loop_test(tc, parse, 0,
			    sizeof(parse_cases) / sizeof(parse_cases[0]));
	tcase_add_test(tc, answer_errors);
	suite_add_tcase(s, tc);
	tc = tcase_create("socket");
	tcase_add_test(tc, serve);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
