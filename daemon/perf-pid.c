/*
 * flame_profd — --perf auto: the node's OS pid checked on this host.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf-pid.h"
#include "perf-symbols.h"
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

/* ::ffff:0:0/96, IPv4 addresses on an IPv6 socket */
static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* An address and port as the kernel's socket tables print them, an
 * IPv4-mapped IPv6 address as the IPv4 one. */
struct endpoint {
	uint8_t addr[16];
	size_t len;		/* 4 or 16 */
	unsigned port;
};

static bool
endpoint_of(const struct sockaddr_storage *ss, struct endpoint *e)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		memcpy(e->addr, &in->sin_addr, 4);
		e->len = 4;
		e->port = ntohs(in->sin_port);
		return true;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

		e->port = ntohs(in6->sin6_port);
		if (memcmp(&in6->sin6_addr, v4mapped, 12) == 0) {
			memcpy(e->addr, (const uint8_t *)&in6->sin6_addr + 12, 4);
			e->len = 4;
		} else {
			memcpy(e->addr, &in6->sin6_addr, 16);
			e->len = 16;
		}
		return true;
	}
	return false;
}

/* "0100007F:1F90" or 32 hex digits and a port: each group of 8 digits is
 * one 32-bit word of the address as it lies in memory, printed as a
 * number of this machine's byte order. */
static bool
parse_endpoint(const char *text, struct endpoint *e)
{
	const char *colon = strchr(text, ':');
	size_t digits = colon ? (size_t)(colon - text) : 0;
	char word[9] = { 0 };
	char *end;

	if (digits != 8 && digits != 32)
		return false;
	for (size_t w = 0; w < digits / 8; w++) {
		uint32_t v;

		memcpy(word, text + 8 * w, 8);
		v = (uint32_t)strtoul(word, &end, 16);
		if (*end)
			return false;
		memcpy(e->addr + 4 * w, &v, 4);
	}
	e->len = digits / 2;
	e->port = (unsigned)strtoul(colon + 1, &end, 16);
	if (end == colon + 1 || (*end && *end != ' '))
		return false;
	if (e->len == 16 && memcmp(e->addr, v4mapped, 12) == 0) {
		memmove(e->addr, e->addr + 12, 4);
		e->len = 4;
	}
	return true;
}

static bool
endpoint_eq(const struct endpoint *a, const struct endpoint *b)
{
	return a->len == b->len && a->port == b->port &&
	       memcmp(a->addr, b->addr, a->len) == 0;
}

/* The inode of the socket in @table (a /proc/net/tcp or tcp6) whose
 * local end is @local and remote end @remote; 0 when none is. */
static unsigned long
socket_inode(const char *table, const struct endpoint *local,
	     const struct endpoint *remote)
{
	unsigned long found = 0;
	char line[512];
	FILE *f;

	f = fopen(table, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char laddr[64], raddr[64];
		struct endpoint l, r;
		unsigned long inode;

		/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
		if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %*s %*s %lu",
			   laddr, raddr, &inode) != 3)
			continue;
		if (parse_endpoint(laddr, &l) && parse_endpoint(raddr, &r) &&
		    endpoint_eq(&l, local) && endpoint_eq(&r, remote))
			found = inode;
	}
	fclose(f);
	return found;
}

/*
 * Whether process @pid holds the node's end of our connection @fd: the
 * socket whose local end is our peer and whose remote end is us, found
 * in this network namespace's TCP tables, among the process's open
 * files. A node named at run time (RabbitMQ names itself so) has no name
 * on its command line, but it holds that socket. False also when it
 * cannot be told here: the socket not in our tables (the node in another
 * network namespace, or reached through a relay), the process's files
 * not readable by us.
 */
static bool
holds_peer_socket(const char *proc_dir, pid_t pid, int fd)
{
	struct sockaddr_storage ours, theirs;
	socklen_t len = sizeof(ours);
	struct endpoint us, peer;
	unsigned long inode;
	char path[4096], want[64];
	struct dirent *de;
	bool held = false;
	DIR *dir;

	if (fd < 0 ||
	    getsockname(fd, (struct sockaddr *)&ours, &len) < 0 ||
	    (len = sizeof(theirs),
	     getpeername(fd, (struct sockaddr *)&theirs, &len) < 0) ||
	    !endpoint_of(&ours, &us) || !endpoint_of(&theirs, &peer))
		return false;
	snprintf(path, sizeof(path), "%s/net/tcp", proc_dir);
	inode = socket_inode(path, &peer, &us);
	if (!inode) {
		snprintf(path, sizeof(path), "%s/net/tcp6", proc_dir);
		inode = socket_inode(path, &peer, &us);
	}
	if (!inode)
		return false;
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	snprintf(path, sizeof(path), "%s/%d/fd", proc_dir, (int)pid);
	dir = opendir(path);
	if (!dir)
		return false;
	while (!held && (de = readdir(dir))) {
		char link[64];
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		n = readlinkat(dirfd(dir), de->d_name, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		held = strcmp(link, want) == 0;
	}
	closedir(dir);
	return held;
}

/* When process @pid started, in seconds since the epoch; -1 when the
 * process's stat or the boot time cannot be read. */
static double
process_start(const char *proc_dir, pid_t pid)
{
	unsigned long long ticks = 0, btime = 0;
	char path[4096], line[256];
	size_t len = 0;
	char *stat, *p;
	long hz = sysconf(_SC_CLK_TCK);
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/stat", proc_dir, (int)pid);
	stat = read_all(path, &len);
	if (!stat)
		return -1;
	/* the command name may hold spaces and parentheses: fields follow
	 * the last ')'; starttime is field 22, the 20th after it */
	p = strrchr(stat, ')');
	if (p) {
		int field = 2;

		while (*p && field < 22)
			if (*p++ == ' ')
				field++;
		found = field == 22 && sscanf(p, "%llu", &ticks) == 1;
	}
	free(stat);
	snprintf(path, sizeof(path), "%s/stat", proc_dir);
	f = found ? fopen(path, "re") : NULL;
	if (!f)
		return -1;
	found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "btime %llu", &btime) == 1;
	fclose(f);
	if (!found || hz <= 0)
		return -1;
	return (double)btime + (double)ticks / (double)hz;
}

enum fpd_perf_pid_state
fpd_perf_pid_check(const char *proc_dir, const char *map_dir, pid_t pid,
		   const char *node, int conn_fd)
{
	enum fpd_perf_pid_state state = FPD_PERF_PID_OK;
	char path[4096];
	struct stat st, proc;
	size_t len = 0;
	double start;
	char *args;
	int fd;

	if (!proc_dir)
		proc_dir = "/proc";
	snprintf(path, sizeof(path), "%s/%d/cmdline", proc_dir, (int)pid);
	args = read_all(path, &len);
	if (!args)
		return FPD_PERF_PID_NONE;
	if (!holds_peer_socket(proc_dir, pid, conn_fd) &&
	    !cmdline_names_node(args, len, node))
		state = FPD_PERF_PID_OTHER;
	free(args);
	if (state != FPD_PERF_PID_OK)
		return state;
	snprintf(path, sizeof(path), "%s/%d", proc_dir, (int)pid);
	if (stat(path, &proc) < 0)
		return FPD_PERF_PID_NONE;
	snprintf(path, sizeof(path), "%s/perf-%d.map", map_dir ? map_dir : "/tmp",
		 (int)pid);
	fd = fpd_perf_map_open(path, proc.st_uid, &st);
	if (fd == -ENOENT)
		return FPD_PERF_PID_NO_MAP;
	if (fd < 0)
		return FPD_PERF_PID_FOREIGN_MAP;
	close(fd);
	/* The VM leaves its map behind when it exits: one last written
	 * before this process started is an earlier process's of that pid
	 * (the JIT writes the map from its first moments on). A second of
	 * slack for the clock ticks' rounding. */
	start = process_start(proc_dir, pid);
	if (start > 0 && (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 < start - 1.0)
		return FPD_PERF_PID_STALE_MAP;
	return FPD_PERF_PID_OK;
}
