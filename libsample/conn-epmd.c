/*
 * flame_profd — where the node listens, and what we call ourselves.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ei.h>

#include "conn.h"
#include "node-private.h"
#include "util-mem.h"

#define EPMD_DEFAULT_PORT 4369
#define EPMD_PORT2_REQ 122
#define EPMD_PORT2_RESP 119
#define EPMD_NAMES_REQ 110
/* epmd's NAMES reply is a line per node ("name NAME at port N\n", 30
 * bytes or so each, a name at most 255): this is room for thousands,
 * and bounds what a peer that is no epmd can make us read. */
#define EPMD_NAMES_MAX (1u << 20)

/*
 * Both ends of a TCP connection have the same address only on one host
 * (in one network namespace); a loopback peer is ours too. A node in
 * another container of this host has an address of its own and counts
 * as remote.
 */
bool
conn_fd_is_local(int fd)
{
	struct sockaddr_storage ours, theirs;
	socklen_t lo = sizeof(ours), lt = sizeof(theirs);

	if (getsockname(fd, (struct sockaddr *)&ours, &lo) < 0 ||
	    getpeername(fd, (struct sockaddr *)&theirs, &lt) < 0 ||
	    ours.ss_family != theirs.ss_family)
		return false;
	if (theirs.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ours;
		const struct sockaddr_in *b = (const struct sockaddr_in *)&theirs;

		return (ntohl(b->sin_addr.s_addr) >> 24) == 127 ||
		       a->sin_addr.s_addr == b->sin_addr.s_addr;
	}
	if (theirs.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ours;
		const struct sockaddr_in6 *b = (const struct sockaddr_in6 *)&theirs;

		return IN6_IS_ADDR_LOOPBACK(&b->sin6_addr) ||
		       memcmp(&a->sin6_addr, &b->sin6_addr,
			      sizeof(a->sin6_addr)) == 0;
	}
	return false;
}

int
conn_resolve_ipv4(const char *host, struct in_addr *addr)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int rc;

	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc != 0 || !res)
		return -EHOSTUNREACH;
	*addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}

static unsigned
epmd_port(void)
{
	const char *env = getenv("ERL_EPMD_PORT");
	long port;
	char *end;

	if (!env || !*env)
		return EPMD_DEFAULT_PORT;
	port = strtol(env, &end, 10);
	if (*end || port <= 0 || port > 65535)
		return EPMD_DEFAULT_PORT;
	return (unsigned)port;
}

static int
connect_tmo(struct fp_node *node, const struct in_addr *addr, unsigned port,
	    unsigned timeout_ms)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr = *addr,
	};
	int fd, rc, err = 0;
	socklen_t len = sizeof(err);

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	if (rc < 0 && errno != EINPROGRESS) {
		rc = -errno;
		goto out_close;
	}
	if (rc < 0) {
		rc = conn_wait_fd(node, fd, POLLOUT, timeout_ms);
		if (rc < 0)
			goto out_close;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
			rc = -(err ? err : errno);
			goto out_close;
		}
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;

out_close:
	close(fd);
	return rc;
}

static int
read_full(struct fp_node *node, int fd, unsigned char *buf, size_t len,
	  unsigned timeout_ms)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n;
		int rc = conn_wait_fd(node, fd, POLLIN, timeout_ms);

		if (rc < 0)
			return rc;
		n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		got += (size_t)n;
	}
	return 0;
}

/*
 * Ask epmd for the node's distribution port ourselves rather than through
 * ei_connect(): ei folds "no epmd", "no such node" and "bad cookie" into one
 * error, and users deserve to be told which it is.
 */
int
conn_epmd_lookup(struct fp_node *node, const struct in_addr *addr,
	    const char *alive, unsigned timeout_ms, unsigned *port)
{
	unsigned char req[3 + MAXATOMLEN], resp[4];
	size_t alen = strlen(alive);
	int fd, rc;

	fd = connect_tmo(node, addr, epmd_port(), timeout_ms);
	if (fd < 0)
		return fd == -ETIMEDOUT || fd == -ECANCELED ? fd : -ECONNREFUSED;

	req[0] = (unsigned char)((alen + 1) >> 8);
	req[1] = (unsigned char)(alen + 1);
	req[2] = EPMD_PORT2_REQ;
	memcpy(req + 3, alive, alen);
	if (write(fd, req, alen + 3) != (ssize_t)(alen + 3)) {
		rc = -ECONNREFUSED;
		goto out;
	}
	rc = read_full(node, fd, resp, 2, timeout_ms);
	if (rc < 0)
		goto out;
	if (resp[0] != EPMD_PORT2_RESP) {
		rc = -EPROTO;
		goto out;
	}
	if (resp[1] != 0) {
		rc = -ENOENT;
		goto out;
	}
	rc = read_full(node, fd, resp, 2, timeout_ms);
	if (rc < 0)
		goto out;
	*port = ((unsigned)resp[0] << 8) | resp[1];
out:
	close(fd);
	return rc;
}

/*
 * Our own node name must use the same kind of host name as the target:
 * a node started with -sname refuses peers with dotted names and the
 * reverse. Long names get an address of this machine that can reach the
 * target.
 */
void
conn_self_host(const struct fp_node *node, const struct in_addr *target_addr,
	       char *host, size_t hostlen)
{
	bool longnames = strchr(node->host, '.') != NULL;
	char buf[256] = "";

	gethostname(buf, sizeof(buf) - 1);
	if (!longnames) {
		char *dot = strchr(buf, '.');

		if (dot)
			*dot = '\0';
		snprintf(host, hostlen, "%s", buf[0] ? buf : "localhost");
		return;
	}
	if (strchr(buf, '.')) {
		snprintf(host, hostlen, "%s", buf);
		return;
	}
	{
		/* Which local address routes to the target? A connected UDP
		 * socket tells without sending anything. */
		struct sockaddr_in sin = { .sin_family = AF_INET,
					   .sin_port = htons(9),
					   .sin_addr = *target_addr };
		struct sockaddr_in me;
		socklen_t len = sizeof(me);
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		snprintf(host, hostlen, "127.0.0.1");
		if (fd < 0)
			return;
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
		    getsockname(fd, (struct sockaddr *)&me, &len) == 0)
			inet_ntop(AF_INET, &me.sin_addr, host, (socklen_t)hostlen);
		close(fd);
	}
}


int
fp_epmd_names(const char *host, unsigned timeout_ms,
	      void (*each)(const char *alive, void *data), void *data)
{
	static const unsigned char req[3] = { 0, 1, EPMD_NAMES_REQ };
	struct in_addr addr;
	char *buf, *line, *next;
	size_t got = 0;
	int fd, rc;

	rc = conn_resolve_ipv4(host, &addr);
	if (rc < 0)
		return rc;
	fd = connect_tmo(NULL, &addr, epmd_port(), timeout_ms);
	if (fd < 0)
		return fd == -ETIMEDOUT ? fd : -ECONNREFUSED;
	buf = xzalloc(EPMD_NAMES_MAX + 1);
	if (write(fd, req, sizeof(req)) != (ssize_t)sizeof(req)) {
		rc = -ECONNREFUSED;
		goto out;
	}
	/* epmd's own port (4 bytes), then the lines until it closes */
	for (;;) {
		ssize_t n;

		rc = conn_wait_fd(NULL, fd, POLLIN, timeout_ms);
		if (rc < 0)
			goto out;
		n = read(fd, buf + got, EPMD_NAMES_MAX - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got == EPMD_NAMES_MAX) {
			rc = -EPROTO;
			goto out;
		}
	}
	if (got < 4) {
		rc = -EPROTO;
		goto out;
	}
	buf[got] = '\0';
	for (line = buf + 4; *line; line = next) {
		char *end = strchr(line, '\n'), *at;

		next = end ? end + 1 : line + strlen(line);
		if (end)
			*end = '\0';
		if (strncmp(line, "name ", 5) != 0)
			continue;
		line += 5;
		at = strstr(line, " at port ");
		if (!at || at == line)
			continue;
		*at = '\0';
		each(line, data);
	}
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}
