/*
 * flame_profd — main(): the command line (options.c), the cookie,
 * the log, then one run (run.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "daemon-log.h"
#include "fs-safe.h"
#include "options.h"
#include "push.h"
#include "run.h"
#include "util-mem.h"

#define MAX_COOKIE 255
#define COOKIE_PATH_MAX 4096
#define COOKIE_ENV "FLAME_PROFD_COOKIE"

static int
read_cookie_file(const char *path, const struct fpd_trust *trust,
		 char *cookie, size_t size);

/*
 * Read the cookie like erl does: the whole file, trailing white space
 * dropped, and refuse a file others can read.
 */
static int
read_cookie(const struct fpd_options *o, const struct fpd_trust *trust,
	    char *cookie, size_t size)
{
	char path[COOKIE_PATH_MAX];
	const char *env = getenv(COOKIE_ENV);

	if (env) {
		size_t len = strlen(env);
		bool use = !o->cookie_file_set && *env;
		char *entry = NULL;

		if (use && len < size)
			snprintf(cookie, size, "%s", env);
		/* Not in our environment any longer (/proc/PID/environ), also
		 * when --cookie-file wins or the value is refused: the whole
		 * "NAME=VALUE" string goes, once out of environ. */
		for (char **e = environ; *e && !entry; e++) {
			if (strncmp(*e, COOKIE_ENV "=", sizeof(COOKIE_ENV)) == 0)
				entry = *e;
		}
		unsetenv(COOKIE_ENV);
		if (entry)
			explicit_bzero(entry, strlen(entry));
		if (use && len >= size) {
			fprintf(stderr, "flame_profd: error: FLAME_PROFD_COOKIE is longer than %zu bytes\n",
				size - 1);
			return FPD_EXIT_NOINPUT;
		}
		if (use)
			return 0;
	}
	if (o->cookie_file_set) {
		snprintf(path, sizeof(path), "%s", o->cookie_file);
	} else {
		const char *home = getenv("HOME");

		if (!home || !*home) {
			struct passwd *pw = getpwuid(getuid());

			home = pw ? pw->pw_dir : "/";
		}
		snprintf(path, sizeof(path), "%s/.erlang.cookie", home);
	}
	return read_cookie_file(path, trust, cookie, size);
}

/* The cookie in the file at @path, as read_cookie() reads one. */
static int
read_cookie_file(const char *path, const struct fpd_trust *trust,
		 char *cookie, size_t size)
{
	const char *why = NULL;
	struct stat st;
	ssize_t n;
	int fd;

	/* Read as root, and often in the node's user's directory: never
	 * through a link that user could make, never a FIFO (O_NONBLOCK),
	 * never a hard link to another file (fs-safe.h). */
	fd = fpd_fs_open_foreign_file(path, trust, &st, &why);
	if (fd < 0 && why) {
		fprintf(stderr, "flame_profd: error: cookie file %s %s\n", path, why);
		return FPD_EXIT_NOINPUT;
	}
	if (fd < 0) {
		fprintf(stderr, "flame_profd: error: cannot read cookie file %s: %s\n",
			path, strerror(-fd));
		return FPD_EXIT_NOINPUT;
	}
	if (st.st_mode & 077) {
		fprintf(stderr, "flame_profd: error: cookie file %s must be accessible by its owner only (chmod 400)\n",
			path);
		close(fd);
		return FPD_EXIT_NOINPUT;
	}
	n = read(fd, cookie, size - 1);
	close(fd);
	if (n < 0) {
		fprintf(stderr, "flame_profd: error: cannot read cookie file %s: %s\n",
			path, strerror(errno));
		return FPD_EXIT_NOINPUT;
	}
	if ((size_t)n == size - 1) {
		fprintf(stderr, "flame_profd: error: cookie file %s holds more than %zu bytes\n",
			path, size - 2);
		return FPD_EXIT_NOINPUT;
	}
	while (n > 0 && (cookie[n - 1] == '\n' || cookie[n - 1] == '\r' ||
			 cookie[n - 1] == ' ' || cookie[n - 1] == '\t'))
		n--;
	cookie[n] = '\0';
	if (n == 0) {
		fprintf(stderr, "flame_profd: error: cookie file %s is empty\n", path);
		return FPD_EXIT_NOINPUT;
	}
	return 0;
}

/*
 * Several nodes: the cookie of each --node NAME@HOST=PATH, NULL for the
 * others (which take the run's cookie). *@cookies is the caller's, each
 * cookie cleared and freed by free_cookies().
 */
static int
read_node_cookies(const struct fpd_options *o, const struct fpd_trust *trust,
		  char ***cookies)
{
	char **c = xzalloc((o->nnodes + 1) * sizeof(*c));
	int rc = 0;

	*cookies = c;
	for (size_t i = 0; i < o->nnodes && !rc; i++) {
		if (!o->node_cookie_files[i])
			continue;
		c[i] = xzalloc(MAX_COOKIE + 2);
		rc = read_cookie_file(o->node_cookie_files[i], trust, c[i],
				      MAX_COOKIE + 2);
	}
	return rc;
}

static void
free_cookies(const struct fpd_options *o, char **cookies)
{
	if (!cookies)
		return;
	for (size_t i = 0; i < o->nnodes; i++) {
		if (cookies[i])
			explicit_bzero(cookies[i], MAX_COOKIE + 2);
		free(cookies[i]);
	}
	free(cookies);
}

/* Whether some node of the run is reached with the run's cookie. */
static bool
needs_run_cookie(const struct fpd_options *o)
{
	if (!fpd_options_fleet(o) || o->discover)
		return true;
	for (size_t i = 0; i < o->nnodes; i++) {
		if (!o->node_cookie_files[i])
			return true;
	}
	return false;
}

/* --push: the header file is read now, as root may still be. */
static int
open_push(struct fpd_options *o, const struct fpd_trust *trust)
{
	struct fpd_push_config pc = {
		.url = o->push_url,
		.header_file = o->push_header_file,
		.service = o->push_service,
		.otlp = o->push_otlp,
		.spool_max = o->push_spool_max,
		.timeout_us = o->push_timeout_us,
		.trust = *trust,
	};
	int rc = fpd_push_new(&pc, &o->push);

	if (rc == -EINVAL)
		return FPD_EXIT_USAGE;
	if (rc == -ENOMEM)
		return FPD_EXIT_SOFTWARE;
	return rc < 0 ? FPD_EXIT_NOINPUT : 0;
}

static void
close_push(struct fpd_options *o)
{
	struct fpd_push_stats s;

	if (!o->push)
		return;
	fpd_push_stop(o->push);
	fpd_push_stats(o->push, &s);
	fpd_push_destroy(o->push);
	o->push = NULL;
	fpd_info("--push: %" PRIu64 " profiles sent, %" PRIu64 " failed requests retried, %"
		 PRIu64 " refused, %" PRIu64 " dropped",
		 s.sent, s.failed, s.rejected, s.dropped);
}

int
main(int argc, char **argv)
{
	struct fpd_options opts;
	struct fpd_trust trust;
	char cookie[MAX_COOKIE + 2];
	char **cookies = NULL;
	const char *why;
	int rc;

	/* The cookie is in memory: no core dumps, no ptrace by the same
	 * user (PR_SET_DUMPABLE also makes /proc/PID/mem root-only). */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	/* A file-size limit shows as EFBIG on write, handled like ENOSPC. */
	signal(SIGXFSZ, SIG_IGN);

	if (argc > 1 && strcmp(argv[1], "ctl") == 0)
		return fpd_ctl_main(argc - 1, argv + 1);
	rc = fpd_options_parse(argc, argv, &opts);
	if (rc)
		goto out;
	trust.uid = opts.user ? opts.uid : geteuid();
	trust.gid = opts.user ? opts.gid : getegid();
	cookie[0] = '\0';
	if (needs_run_cookie(&opts))
		rc = read_cookie(&opts, &trust, cookie, sizeof(cookie));
	else
		unsetenv(COOKIE_ENV);
	if (rc)
		goto out;
	if (fpd_options_fleet(&opts)) {
		rc = read_node_cookies(&opts, &trust, &cookies);
		if (rc)
			goto out;
	}
	rc = fpd_log_open(opts.log_file, opts.verbosity, opts.file_mode, &trust,
			  &why);
	if (rc < 0 && why) {
		fprintf(stderr, "flame_profd: error: log file %s %s: flame_profd "
			"logs only to a regular file of root or of the user it "
			"runs as, in a directory no other user can write, reached "
			"through no link another user could make\n",
			opts.log_file, why);
	} else if (rc < 0) {
		fprintf(stderr, "flame_profd: error: cannot open log file %s: %s\n",
			opts.log_file, strerror(-rc));
	}
	if (rc < 0) {
		rc = FPD_EXIT_CANTCREAT;
		goto out;
	}
	if (opts.user && fpd_log_chown(opts.uid, opts.gid, opts.user) < 0) {
		fprintf(stderr, "flame_profd: error: cannot hand log file %s to user %s: %s\n",
			opts.log_file, opts.user, strerror(errno));
		fpd_log_close();
		rc = FPD_EXIT_CANTCREAT;
		goto out;
	}

	if (opts.push_url) {
		rc = open_push(&opts, &trust);
		if (rc) {
			fpd_log_close();
			goto out;
		}
	}
	if (fpd_options_fleet(&opts))
		rc = fpd_run_fleet(&opts, cookie, cookies);
	else
		rc = fpd_run(&opts, cookie);
	close_push(&opts);
	fpd_log_close();
out:
	free_cookies(&opts, cookies);
	explicit_bzero(cookie, sizeof(cookie));
	fpd_options_release(&opts);
	return rc;
}
