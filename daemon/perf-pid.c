/*
 * flame_profd — --perf auto: the node's OS pid checked on this host.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf-pid.h"
#include "util-mem.h"

/* Read no more of a command line than this; erl's, with elixir's -pa
 * lists before the name, are a few KiB. */
#define CMDLINE_MAX (1u << 20)

/* The whole of @path, NUL-terminated; NULL when it cannot be read. */
static char *
read_all(const char *path, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	buf = xrealloc(NULL, cap + 1);
	for (;;) {
		ssize_t got;

		if (n == cap) {
			if (cap >= CMDLINE_MAX)
				break;
			cap *= 2;
			buf = xrealloc(buf, cap + 1);
		}
		got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Whether @given, the value of -sname or -name, makes the node's name
 * @node: the whole name, or its part before '@' when no host is given
 * (erl adds the host then). */
static bool
names_node(const char *given, const char *node)
{
	const char *at = strchr(node, '@');

	if (strcmp(given, node) == 0)
		return true;
	return !strchr(given, '@') && at &&
	       strlen(given) == (size_t)(at - node) &&
	       memcmp(given, node, (size_t)(at - node)) == 0;
}

/*
 * beam.smp's arguments are erl's after erlexec has merged ERL_FLAGS and
 * any -args_file (vm.args of a release) into them; `elixir --sname X`
 * and a release's start script hand erl -sname X too. What follows
 * -extra is the program's own, no flag of erl's.
 */
static bool
cmdline_names_node(const char *args, size_t len, const char *node)
{
	const char *given = NULL;

	for (size_t at = 0; at < len;) {
		const char *arg = args + at;
		size_t n = strlen(arg);

		if (strcmp(arg, "-extra") == 0)
			break;
		if ((strcmp(arg, "-sname") == 0 || strcmp(arg, "-name") == 0) &&
		    at + n + 1 < len)
			given = arg + n + 1;
		at += n + 1;
	}
	return given && names_node(given, node);
}

enum fpd_perf_pid_state
fpd_perf_pid_check(const char *proc_dir, const char *map_dir, pid_t pid,
		   const char *node)
{
	enum fpd_perf_pid_state state = FPD_PERF_PID_OK;
	char path[4096];
	struct stat st;
	size_t len = 0;
	char *args;

	snprintf(path, sizeof(path), "%s/%d/cmdline", proc_dir ? proc_dir : "/proc",
		 (int)pid);
	args = read_all(path, &len);
	if (!args)
		return FPD_PERF_PID_NONE;
	if (!cmdline_names_node(args, len, node))
		state = FPD_PERF_PID_OTHER;
	free(args);
	if (state != FPD_PERF_PID_OK)
		return state;
	snprintf(path, sizeof(path), "%s/perf-%d.map", map_dir ? map_dir : "/tmp",
		 (int)pid);
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return FPD_PERF_PID_NO_MAP;
	return FPD_PERF_PID_OK;
}
