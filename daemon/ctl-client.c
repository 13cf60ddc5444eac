/*
 * flame_profd — `flame_profd ctl`: ask running daemons, through their
 * control sockets (ctl.h), for a capture or their status.
 *
 * The sockets are found under --dir (the daemon's --out): DIR itself if
 * it is a node's directory, DIR/<node> with --node, else every node
 * directory of DIR that has one (a daemon of several nodes, or several
 * daemons sharing one --out).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "options.h"
#include "util.h"
#include "util-buf.h"
#include "util-escape.h"
#include "util-mem.h"
#include "fp/perf-file.h"

#define ANSWER_MAX 8192
#define TIMEOUT_DEFAULT_US 5000000u

static const char usage[] =
"Usage: flame_profd ctl [--dir DIR] [--node NAME@HOST] status\n"
"       flame_profd ctl [--dir DIR] [--node NAME@HOST] trigger --reason TEXT\n"
"Ask a running flame_profd, through the control socket in its node's\n"
"directory (DIR/<node>/" FPD_CTL_SOCKET "), for a capture of its flight recorder or\n"
"its status. Only root and the user the daemon runs as are served.\n"
"\n"
"      --dir DIR             the daemon's --out (default .), or a node's\n"
"                            directory in it\n"
"      --node NAME@HOST      that node's daemon; without it, every node under\n"
"                            DIR that has a control socket\n"
"      --reason TEXT         trigger: why, 1 to 128 bytes; the capture's\n"
"                            directory is capture.<time>.ctl and the manifest\n"
"                            gives TEXT (escaped) as its reason\n"
"      --timeout DUR         wait at most DUR for each answer (default 5s)\n"
"  -h, --help                this text\n"
"\n"
"status prints, for each node: node, dir, connected, samples, achieved\n"
"(samples a second over the last 10 s), flight_recorder, and with it\n"
"ring_bytes, ring_peak_bytes, ring_samples, ring_span, captures,\n"
"captures_last_hour, held_off, capped and last_trigger.\n"
"\n"
"Exit status (with several nodes, that of the first that failed):\n"
"   0  done\n"
"  64  bad command line\n"
"  69  no daemon: no control socket under DIR, or none listening on it\n"
"  70  no answer in time, or an answer not understood\n"
"  75  trigger held off: a capture is being written (it holds this moment),\n"
"      or --max-captures-per-hour was reached (counted, nothing written)\n"
"  77  refused: neither root nor the daemon's user\n"
"  78  trigger: the daemon runs without --flight-recorder\n";

struct ctl_args {
	const char *dir;
	const char *node;
	const char *reason;
	uint64_t timeout_us;
	enum fpd_ctl_verb verb;
};

static int
bad(const char *what)
{
	fprintf(stderr, "flame_profd ctl: %s (see flame_profd ctl --help)\n", what);
	return FPD_EXIT_USAGE;
}

static int
parse_args(int argc, char **argv, struct ctl_args *a)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "node", required_argument, NULL, 'n' },
		{ "reason", required_argument, NULL, 'r' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*a = (struct ctl_args){ .dir = ".", .timeout_us = TIMEOUT_DEFAULT_US };
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			a->dir = optarg;
			break;
		case 'n':
			a->node = optarg;
			break;
		case 'r':
			a->reason = optarg;
			break;
		case 't':
			if (fpd_parse_duration(optarg, &a->timeout_us) < 0 ||
			    !a->timeout_us)
				return bad("--timeout: expected a duration, e.g. 5s");
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		default:
			return bad("unknown option, or an option without its value");
		}
	}
	if (optind != argc - 1)
		return bad("expected one command: status or trigger");
	if (strcmp(argv[optind], "status") == 0) {
		a->verb = FPD_CTL_STATUS;
		if (a->reason)
			return bad("--reason is for trigger");
	} else if (strcmp(argv[optind], "trigger") == 0) {
		a->verb = FPD_CTL_TRIGGER;
		if (!a->reason || !*a->reason ||
		    strlen(a->reason) > FPD_CAPTURE_REASON_RAW)
			return bad("trigger needs --reason TEXT of 1 to 128 bytes");
		if (strchr(a->reason, '\n'))
			return bad("--reason is one line");
	} else {
		return bad("unknown command: expected status or trigger");
	}
	return 0;
}

/* What the client prints of the daemon's text: escaped again, whatever
 * it sent. */
static void
print_escaped(FILE *f, const char *s, size_t len)
{
	struct fp_text t = { 0 };

	fp_text_put_escaped(&t, s, len, NULL);
	fwrite(t.buf, 1, t.len, f);
	fp_text_free(&t);
}

/* Connect to @dir's socket (a path of any length: through the
 * directory, relative). @return the descriptor, or a negative errno. */
static int
connect_in(const char *dir, uint64_t timeout_us)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { (time_t)(timeout_us / 1000000),
			      (suseconds_t)(timeout_us % 1000000) };
	int fd, cwd, rc = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", FPD_CTL_SOCKET);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd < 0 || chdir(dir) < 0)
		rc = -errno;
	else if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		rc = -errno;
	if (cwd >= 0) {
		if (fchdir(cwd) < 0 && rc == 0)
			rc = -errno;
		close(cwd);
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

static int
exit_of_error(int e)
{
	switch (e) {
	case FPD_CTL_ERR_REFUSED:
		return FPD_EXIT_NOPERM;
	case FPD_CTL_ERR_NO_RECORDER:
		return FPD_EXIT_CONFIG;
	case FPD_CTL_ERR_HELD_OFF:
	case FPD_CTL_ERR_CAPPED:
		return FPD_EXIT_TEMPFAIL;
	default:
		return FPD_EXIT_SOFTWARE;
	}
}

/* One daemon: the request, the answer printed. @return an exit status. */
static int
ask(const char *dir, const struct ctl_args *a)
{
	char answer[ANSWER_MAX + 1], req[FPD_CTL_LINE_MAX + 16];
	size_t len = 0, rlen;
	char *nl;
	ssize_t n;
	int fd, e, send_err = 0;

	fd = connect_in(dir, a->timeout_us);
	if (fd == -EACCES || fd == -EPERM) {
		fprintf(stderr, "flame_profd ctl: %s/%s: refused: only root and "
			"the daemon's user may use it\n", dir, FPD_CTL_SOCKET);
		return FPD_EXIT_NOPERM;
	}
	if (fd < 0) {
		fprintf(stderr, "flame_profd ctl: %s/%s: %s: no flame_profd "
			"listening there\n", dir, FPD_CTL_SOCKET, strerror(-fd));
		return FPD_EXIT_UNAVAILABLE;
	}
	if (a->verb == FPD_CTL_STATUS)
		rlen = (size_t)snprintf(req, sizeof(req), "status\n");
	else
		rlen = (size_t)snprintf(req, sizeof(req), "trigger %s\n", a->reason);
	/* a refusal may be answered, and the connection closed, before
	 * the request is sent: the answer is read either way */
	if (send(fd, req, rlen, MSG_NOSIGNAL) != (ssize_t)rlen)
		send_err = errno;
	while (len < ANSWER_MAX &&
	       (n = recv(fd, answer + len, ANSWER_MAX - len, 0)) > 0)
		len += (size_t)n;
	close(fd);
	answer[len] = '\0';
	nl = memchr(answer, '\n', len);
	if (!nl && send_err) {
		fprintf(stderr, "flame_profd ctl: %s/%s: cannot send: %s\n", dir,
			FPD_CTL_SOCKET, strerror(send_err));
		return FPD_EXIT_UNAVAILABLE;
	}
	if (!nl) {
		fprintf(stderr, "flame_profd ctl: %s/%s: no answer within the "
			"timeout\n", dir, FPD_CTL_SOCKET);
		return FPD_EXIT_SOFTWARE;
	}
	*nl = '\0';
	e = fpd_ctl_answer_error(answer);
	if (e < 0) {
		fprintf(stderr, "flame_profd ctl: %s/%s: an answer not understood: ",
			dir, FPD_CTL_SOCKET);
		print_escaped(stderr, answer, strlen(answer));
		fputc('\n', stderr);
		return FPD_EXIT_SOFTWARE;
	}
	if (e < FPD_CTL_ERRORS) {
		fprintf(stderr, "flame_profd ctl: %s: ", dir);
		print_escaped(stderr, answer, strlen(answer));
		fputc('\n', stderr);
		return exit_of_error(e);
	}
	/* the lines after "ok", each ended by '\n' */
	for (char *p = nl + 1; p < answer + len;) {
		char *end = memchr(p, '\n', (size_t)(answer + len - p));
		size_t l = end ? (size_t)(end - p) : (size_t)(answer + len - p);

		print_escaped(stdout, p, l);
		fputc('\n', stdout);
		p += l + 1;
	}
	return 0;
}

/* 1: @dir holds a socket at the name; 0: not; -EACCES: we may not look. */
static int
has_socket(const char *dir)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, FPD_CTL_SOCKET);
	if (lstat(path, &st) < 0)
		return errno == EACCES ? -EACCES : 0;
	return S_ISSOCK(st.st_mode);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every node directory of @base with a socket (or that we may not look
 * into), sorted; *@n of them; *@err: why @base could not be read. */
static char **
node_dirs(const char *base, size_t *n, int *err)
{
	DIR *d = opendir(base);
	struct dirent *de;
	char **dirs = NULL;
	size_t cap = 0;

	*n = 0;
	*err = d ? 0 : -errno;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		char *path;

		if (de->d_name[0] == '.')
			continue;
		path = xzalloc(strlen(base) + strlen(de->d_name) + 2);
		sprintf(path, "%s/%s", base, de->d_name);
		if (has_socket(path) == 0) {
			free(path);
			continue;
		}
		FP_GROW(dirs, cap, *n + 1);
		dirs[(*n)++] = path;
	}
	closedir(d);
	if (*n)
		qsort(dirs, *n, sizeof(*dirs), name_cmp);
	return dirs;
}

int
fpd_ctl_main(int argc, char **argv)
{
	struct ctl_args a;
	char **dirs = NULL;
	size_t n = 0;
	int rc = parse_args(argc, argv, &a), err = 0;

	if (rc)
		return rc;
	if (has_socket(a.dir) == -EACCES) {
		fprintf(stderr, "flame_profd ctl: %s: refused: permission denied "
			"(run it as root, or as the daemon's user where that user "
			"may reach %s)\n", a.dir, a.dir);
		return FPD_EXIT_NOPERM;
	}
	if (has_socket(a.dir) == 1 && !a.node) {
		dirs = xzalloc(sizeof(*dirs));
		dirs[n++] = xstrdup(a.dir);
	} else if (a.node) {
		char *node = fp_perf_node_name(a.node);

		dirs = xzalloc(sizeof(*dirs));
		dirs[0] = xzalloc(strlen(a.dir) + strlen(node) + 2);
		sprintf(dirs[0], "%s/%s", a.dir, node);
		free(node);
		n = 1;
	} else {
		dirs = node_dirs(a.dir, &n, &err);
	}
	if (err == -EACCES) {
		fprintf(stderr, "flame_profd ctl: %s: refused: permission denied "
			"(run it as root, or as the daemon's user where that user "
			"may reach %s)\n", a.dir, a.dir);
		free(dirs);
		return FPD_EXIT_NOPERM;
	}
	if (!n)
		fprintf(stderr, "flame_profd ctl: no control socket under %s: is "
			"flame_profd running with --out %s?\n", a.dir, a.dir);
	rc = n ? 0 : FPD_EXIT_UNAVAILABLE;
	for (size_t i = 0; i < n; i++) {
		int r = ask(dirs[i], &a);

		if (r && !rc)
			rc = r;
		if (a.verb == FPD_CTL_STATUS && i + 1 < n)
			fputc('\n', stdout);
		free(dirs[i]);
	}
	free(dirs);
	return rc;
}
