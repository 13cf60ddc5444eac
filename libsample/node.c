/*
 * flame_profd — hidden C node: epmd lookup, handshake, rpc through rex.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <ei.h>

#include "etf.h"
#include "fp/log.h"
#include "node-private.h"
#include "util-mem.h"

#define EPMD_DEFAULT_PORT 4369
#define EPMD_PORT2_REQ 122
#define EPMD_PORT2_RESP 119

static int ei_initialised;

bool
node_same_pid(const erlang_pid *a, const erlang_pid *b)
{
	return a->num == b->num && a->serial == b->serial &&
	       a->creation == b->creation && strcmp(a->node, b->node) == 0;
}

int
fp_node_name_check(const char *name, const char **why)
{
	const char *at = strchr(name, '@');
	size_t alive_len;

	if (!at) {
		*why = "a node name needs a host part: name@host";
		return -EINVAL;
	}
	alive_len = (size_t)(at - name);
	if (alive_len == 0) {
		*why = "the name part before '@' is empty";
		return -EINVAL;
	}
	if (at[1] == '\0') {
		*why = "the host part after '@' is empty";
		return -EINVAL;
	}
	if (strchr(at + 1, '@')) {
		*why = "a node name has exactly one '@'";
		return -EINVAL;
	}
	if (strlen(name) >= MAXNODELEN || alive_len >= MAXATOMLEN - 1 ||
	    strlen(at + 1) > EI_MAXHOSTNAMELEN) {
		*why = "the node name is too long";
		return -EINVAL;
	}
	for (const char *p = name; p < at; p++) {
		unsigned char c = (unsigned char)*p;

		/* What epmd and erl accept for the alive part. */
		if (!(c == '_' || c == '-' || (c >= '0' && c <= '9') ||
		      (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c >= 0x80)) {
			*why = "the name part may only hold letters, digits, '_' and '-'";
			return -EINVAL;
		}
	}
	for (const char *p = at + 1; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c <= ' ' || c == '/' || c == '\'' || c == '"') {
			*why = "the host part holds a character no host name has";
			return -EINVAL;
		}
	}
	return 0;
}

struct fp_node *
fp_node_new(const char *target, const char *cookie)
{
	struct fp_node *node = xnew(struct fp_node);
	const char *at = strchr(target, '@');

	node->target = xstrdup(target);
	node->cookie = xstrdup(cookie);
	node->fd = -1;
	node->wordsize = 8;
	if (at) {
		snprintf(node->alive, sizeof(node->alive), "%.*s",
			 (int)(at - target), target);
		snprintf(node->host, sizeof(node->host), "%s", at + 1);
	}
	ei_x_new(&node->rx);
	ei_x_new(&node->tx);
	ei_x_new(&node->extra_items);
	return node;
}

enum fp_request_path
fp_node_request_path(const struct fp_node *node)
{
	return node->fd >= 0 ? node->path_now : node->path;
}

void
fp_node_set_request_path(struct fp_node *node, enum fp_request_path path)
{
	node->path = path;
}

void
fp_node_set_address(struct fp_node *node, const char *host, unsigned port)
{
	free(node->via_host);
	node->via_host = xstrdup(host);
	node->via_port = port;
}

void
fp_node_set_give_up(struct fp_node *node, bool (*give_up)(void *data),
		    void *data)
{
	node->give_up = give_up;
	node->give_up_data = data;
}

static void
free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static char **
copy_names(const char *const *names, size_t n)
{
	char **copy = n ? xzalloc(n * sizeof(*copy)) : NULL;

	for (size_t i = 0; i < n; i++)
		copy[i] = xstrdup(names[i]);
	return copy;
}

void
fp_node_set_extras(struct fp_node *node, const struct fp_extras *extras)
{
	free_names(node->keys, node->nkeys);
	free_names(node->logger_keys, node->nlogger_keys);
	node->keys = copy_names(extras->keys, extras->nkeys);
	node->nkeys = extras->nkeys;
	node->logger_keys = copy_names(extras->logger_keys, extras->nlogger_keys);
	node->nlogger_keys = extras->nlogger_keys;
	node->callers = extras->callers;
}

enum fp_label_source
fp_node_label_source(const struct fp_node *node)
{
	return node->label_source;
}

bool
fp_node_records_keys(const struct fp_node *node)
{
	return node->dict_keys &&
	       (node->nkeys || node->nlogger_keys || node->callers);
}

void
fp_node_destroy(struct fp_node *node)
{
	if (!node)
		return;
	fp_node_disconnect(node);
	ei_x_free(&node->rx);
	ei_x_free(&node->tx);
	explicit_bzero(node->cookie, strlen(node->cookie));
	explicit_bzero(&node->ec, sizeof(node->ec));
	free(node->cookie);
	free(node->target);
	free(node->via_host);
	free(node->scan_exprs);
	free_names(node->keys, node->nkeys);
	free_names(node->logger_keys, node->nlogger_keys);
	ei_x_free(&node->extra_items);
	free(node);
}

static void stop_eval_samplers(struct fp_node *node);

void
fp_node_disconnect(struct fp_node *node)
{
	if (node->fd < 0)
		return;
	/* nothing more goes onto a stream cut mid-message */
	if (!node->broken)
		stop_eval_samplers(node);
	node->nsamplers = 0;
	node_helper_stop(node);
	/* a give-up in there may have closed it already */
	if (node->fd >= 0)
		ei_close_connection(node->fd);
	node->fd = -1;
	node->broken = false;
	/* the janitor sees the connection go */
	node->depth_attached = false;
}

int
node_io_failed(struct fp_node *node, int err)
{
	if (!node->cancelled)
		return err;
	node->cancelled = false;
	node->broken = true;
	fp_node_disconnect(node);
	return -ECANCELED;
}

int
fp_node_fd(const struct fp_node *node)
{
	return node->fd;
}

const char *
fp_node_name(const struct fp_node *node)
{
	return node->name[0] ? node->name : node->target;
}

const char *
fp_node_self_name(const struct fp_node *node)
{
	return node->self_name;
}

const char *
fp_node_otp_release(const struct fp_node *node)
{
	return node->otp_release;
}

struct fp_pid
fp_node_rex_pid(const struct fp_node *node)
{
	return node->rex;
}

unsigned
fp_node_wordsize(const struct fp_node *node)
{
	return node->wordsize;
}

unsigned
fp_node_schedulers(const struct fp_node *node)
{
	return node->schedulers ? node->schedulers : 1;
}

bool
fp_node_is_local(const struct fp_node *node)
{
	return node->local;
}

/*
 * Both ends of a TCP connection have the same address only on one host
 * (in one network namespace); a loopback peer is ours too. A node in
 * another container of this host has an address of its own and counts
 * as remote.
 */
static bool
fd_is_local(int fd)
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
fp_node_health_request(struct fp_node *node, uint64_t *id)
{
	ei_x_buff args;
	int rc;

	ei_x_new(&args);
	ei_x_encode_list_header(&args, 1);
	ei_x_encode_atom(&args, "total_run_queue_lengths");
	ei_x_encode_empty_list(&args);
	rc = node_rpc_send(node, "erlang", "statistics", &args, id);
	ei_x_free(&args);
	return rc;
}

int
fp_node_decode_int(const struct fp_reply *reply, int64_t *value)
{
	int index = reply->index;

	if (reply->badrpc || node_reply_check(reply) < 0)
		return -EBADMSG;
	return node_decode_int(reply->buf, &index, value);
}

static int
resolve_ipv4(const char *host, struct in_addr *addr)
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

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Wait for @events on @fd, at most @timeout_ms (0: no limit), in slices:
 * whenever the fd is not ready, the caller's give_up is asked. 0 when
 * ready (or in error: the read or write that follows reports it),
 * -ETIMEDOUT, -ECANCELED, or a negative errno.
 */
static int
wait_fd(struct fp_node *node, int fd, short events, unsigned timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	uint64_t start = mono_ms();
	int slice = 0;	/* a look first: a ready fd asks nothing */

	for (;;) {
		uint64_t waited;
		int rc = poll(&pfd, 1, slice);

		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
		if (node->give_up && node->give_up(node->give_up_data))
			return -ECANCELED;
		waited = mono_ms() - start;
		if (timeout_ms && waited >= timeout_ms)
			return -ETIMEDOUT;
		slice = FP_NODE_SLICE_MS;
		if (timeout_ms && timeout_ms - waited < (uint64_t)slice)
			slice = (int)(timeout_ms - waited);
	}
}

/*
 * ei's socket callbacks for our connections (ei_connect_xinit_ussi()),
 * which ei calls with its timeouts for every read and write, the
 * handshake's included (EI_SCLBK_FLG_FULL_IMPL): ei's own waits are one
 * poll for the whole timeout, and nothing could end them early. The
 * socket is non-blocking; each call waits in wait_fd()'s slices. A wait
 * given up answers ETIMEDOUT, which ei passes on, and marks the node
 * (node_io_failed()).
 */
struct node_io {
	int fd;
	struct fp_node *node;
};

/* ei's convention: 0 and EI_SCLBK_INF_TMO are no limit */
static unsigned
io_tmo(unsigned tmo)
{
	return tmo == EI_SCLBK_INF_TMO ? 0 : tmo;
}

static int
io_wait(struct node_io *io, short events, unsigned tmo)
{
	int rc = wait_fd(io->node, io->fd, events, io_tmo(tmo));

	if (rc == -ECANCELED) {
		io->node->cancelled = true;
		return ETIMEDOUT;
	}
	return -rc;
}

static int
io_socket(void **ctx, void *setup_ctx)
{
	struct node_io *io;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return errno;
	io = xnew(struct node_io);
	io->fd = fd;
	io->node = setup_ctx;
	*ctx = io;
	return 0;
}

static int
io_close(void *ctx)
{
	struct node_io *io = ctx;
	int rc = close(io->fd) < 0 ? errno : 0;

	free(io);
	return rc;
}

static int
io_listen(void *ctx, void *addr, int *len, int backlog)
{
	return EOPNOTSUPP;	/* a C node that only connects */
}

static int
io_accept(void **ctx, void *addr, int *len, unsigned tmo)
{
	return EOPNOTSUPP;
}

static int
io_connect(void *ctx, void *addr, int len, unsigned tmo)
{
	struct node_io *io = ctx;
	socklen_t elen = sizeof(int);
	int rc, err = 0;

	if (connect(io->fd, addr, (socklen_t)len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return errno;
	rc = io_wait(io, POLLOUT, tmo);
	if (rc)
		return rc;
	if (getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
		return errno;
	return err;
}

/* One readv or writev, waiting in slices while the socket is not ready. */
static int
io_xfer(struct node_io *io, ssize_t (*op)(int, const struct iovec *, int),
	short events, const struct iovec *iov, int iovcnt, ssize_t *len,
	unsigned tmo)
{
	for (;;) {
		ssize_t n = op(io->fd, iov, iovcnt);
		int rc;

		if (n >= 0) {
			*len = n;
			return 0;
		}
		if (errno != EAGAIN && errno != EINTR)
			return errno;
		if (errno == EAGAIN && (rc = io_wait(io, events, tmo)))
			return rc;
	}
}

static int
io_writev(void *ctx, const void *iov, int iovcnt, ssize_t *len, unsigned tmo)
{
	return io_xfer(ctx, writev, POLLOUT, iov, iovcnt, len, tmo);
}

static int
io_write(void *ctx, const char *buf, ssize_t *len, unsigned tmo)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = (size_t)*len };

	return io_xfer(ctx, writev, POLLOUT, &iov, 1, len, tmo);
}

static int
io_read(void *ctx, char *buf, ssize_t *len, unsigned tmo)
{
	struct iovec iov = { .iov_base = buf, .iov_len = (size_t)*len };

	return io_xfer(ctx, readv, POLLIN, &iov, 1, len, tmo);
}

static int
io_handshake_header_size(void *ctx, int *sz)
{
	*sz = 2;
	return 0;
}

/* as ei's own TCP sockets */
static int
io_connected(void *ctx)
{
	struct node_io *io = ctx;
	int one = 1;

	if (setsockopt(io->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(io->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0)
		return errno;
	return 0;
}

static int
io_accepted(void *ctx)
{
	return 0;
}

static int
io_get_fd(void *ctx, int *fd)
{
	*fd = ((struct node_io *)ctx)->fd;
	return 0;
}

static ei_socket_callbacks node_io_callbacks = {
	.flags = EI_SCLBK_FLG_FULL_IMPL,
	.socket = io_socket,
	.close = io_close,
	.listen = io_listen,
	.EI_ACCEPT_NAME = io_accept,
	.connect = io_connect,
	.writev = io_writev,
	.write = io_write,
	.read = io_read,
	.handshake_packet_header_size = io_handshake_header_size,
	.connect_handshake_complete = io_connected,
	.accept_handshake_complete = io_accepted,
	.get_fd = io_get_fd,
};

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
		rc = wait_fd(node, fd, POLLOUT, timeout_ms);
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
		int rc = wait_fd(node, fd, POLLIN, timeout_ms);

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
static int
epmd_lookup(struct fp_node *node, const struct in_addr *addr,
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
static void
make_self_name(struct fp_node *node, const struct in_addr *target_addr,
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

void
node_encode_ref(struct fp_node *node, ei_x_buff *x, uint64_t id, bool unchecked)
{
	erlang_ref ref;

	memset(&ref, 0, sizeof(ref));
	snprintf(ref.node, sizeof(ref.node), "%s", node->self_name);
	ref.len = 3;
	ref.n[0] = (unsigned)(id & 0x3ffff);
	ref.n[1] = (unsigned)(id >> 18);
	ref.n[2] = unchecked ? REF_MAGIC_UNCHECKED : REF_MAGIC;
	ref.creation = node->ec.creation;
	ei_x_encode_ref(x, &ref);
}

/*
 * ei_x_* grows a buffer to what one encode needs plus 200 bytes, so a
 * long run of encodes into one buffer copies it over and over:
 * quadratic in the length of a list. Doubling makes the run linear.
 * ei allocates with malloc (ei_x_new()) and reallocates unless
 * ei_x_extra (100) bytes stay free past what an encode needs.
 */
#define X_SLACK 128

void
node_x_reserve(ei_x_buff *x, size_t more)
{
	size_t want = (size_t)x->index + more + X_SLACK, size;

	if (want <= (size_t)x->buffsz)
		return;
	size = (size_t)x->buffsz * 2;
	if (size < want)
		size = want;
	if (size > INT_MAX)
		size = INT_MAX;
	x->buff = xrealloc(x->buff, size);
	x->buffsz = (int)size;
}

/*
 * {'$gen_call', {Self, Ref}, {call, Mod, Fun, Args, user}} makes rex
 * spawn a worker and answer {Ref, Reply}: tagged replies, unlike
 * ei_rpc_to()'s {rex, Reply}. @timed wraps the call in
 * timer:tc(Mod, Fun, Args) without copying Args twice.
 */
void
node_rpc_encode(struct fp_node *node, ei_x_buff *x, const char *mod,
		const char *fun, const ei_x_buff *args, uint64_t id,
		bool unchecked, bool timed)
{
	x->index = 0;
	node_x_reserve(x, (size_t)args->index + 2 * MAXATOMLEN_UTF8 + 512);
	ei_x_encode_version(x);
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "$gen_call");
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_pid(x, ei_self(&node->ec));
	node_encode_ref(node, x, id, unchecked);
	ei_x_encode_tuple_header(x, 5);
	ei_x_encode_atom(x, "call");
	if (timed) {
		ei_x_encode_atom(x, "timer");
		ei_x_encode_atom(x, "tc");
		ei_x_encode_list_header(x, 3);
	}
	ei_x_encode_atom(x, mod);
	ei_x_encode_atom(x, fun);
	ei_x_append_buf(x, args->buff, args->index);
	if (timed)
		ei_x_encode_empty_list(x);
	ei_x_encode_atom(x, "user");
}

static int
rpc_send(struct fp_node *node, const char *mod, const char *fun,
	 const ei_x_buff *args, uint64_t *id, bool unchecked, bool timed)
{
	ei_x_buff *x = &node->tx;
	int rc;

	if (node->fd < 0)
		return -ENOTCONN;

	*id = ++node->next_id;
	node_rpc_encode(node, x, mod, fun, args, *id, unchecked, timed);
	rc = ei_reg_send_tmo(&node->ec, node->fd, "rex", x->buff, x->index,
			     10000);
	if (rc < 0)
		return node_io_failed(node, erl_errno == ETIMEDOUT ? -ETIMEDOUT :
						     -ECONNRESET);
	return 0;
}

int
node_rpc_send(struct fp_node *node, const char *mod, const char *fun,
	      const ei_x_buff *args, uint64_t *id)
{
	return rpc_send(node, mod, fun, args, id, false, false);
}

/*
 * The same call wrapped in timer:tc(Mod, Fun, Args): the reply is
 * {Microseconds, Result}, the node-side wall time of the call, which is
 * what the daemon's cost budget counts (fp_reply_take_time()). With
 * @unchecked the result reaches the caller unchecked (fp_reply.checked).
 */
int
node_rpc_send_timed(struct fp_node *node, const char *mod, const char *fun,
		    const ei_x_buff *args, uint64_t *id, bool unchecked)
{
	return rpc_send(node, mod, fun, args, id, unchecked, true);
}

int
fp_reply_take_time(struct fp_reply *reply, uint64_t *us)
{
	const unsigned char *b = (const unsigned char *)reply->buf;
	size_t p = (size_t)reply->index, end;
	int index;
	int64_t v;

	/* {Microseconds, Result}, read without trusting an unchecked reply */
	if (reply->badrpc || reply->len - p < 2 || b[p] != ERL_SMALL_TUPLE_EXT ||
	    b[p + 1] != 2)
		return -EBADMSG;
	p += 2;
	end = p;
	if (etf_int(b, reply->len, &end, &v) < 0) {
		/* a bignum: check it before ei reads it */
		if (node_term_skip(reply->buf, reply->len, &end) < 0)
			return -EBADMSG;
		index = (int)p;
		if (node_decode_int(reply->buf, &index, &v) < 0 ||
		    (size_t)index != end)
			return -EBADMSG;
	}
	if (v < 0)
		return -EBADMSG;
	*us = (uint64_t)v;
	reply->index = (int)end;
	return 0;
}

int
node_skip_term(const char *buf, int *index)
{
	return ei_skip_term(buf, index) < 0 ? -EBADMSG : 0;
}

int
node_decode_atom(const char *buf, int *index, char *dst)
{
	if (ei_decode_atom_as(buf, index, dst, MAXATOMLEN_UTF8, ERLANG_UTF8,
			      NULL, NULL) < 0)
		return -EBADMSG;
	return 0;
}

int
node_decode_pid(const char *buf, int *index, struct fp_pid *pid)
{
	erlang_pid p;

	if (ei_decode_pid(buf, index, &p) < 0)
		return -EBADMSG;
	pid->num = p.num;
	pid->serial = p.serial;
	return 0;
}

int
node_decode_int(const char *buf, int *index, int64_t *value)
{
	long long v;

	if (ei_decode_longlong(buf, index, &v) < 0)
		return -EBADMSG;
	*value = v;
	return 0;
}

int
node_parse_reply(const char *buf, size_t len, struct fp_reply *reply)
{
	const unsigned char *b = (const unsigned char *)buf;
	int index = 3, type, size;
	size_t p = 3;
	erlang_ref ref;
	bool checked;

	/* {Ref, Result}: the envelope is checked here; the result too, unless
	 * the request asked to check it itself */
	if (len < 1 || b[0] != 131)
		return -EBADMSG;
	if (len < 3 || b[1] != ERL_SMALL_TUPLE_EXT || b[2] != 2)
		return node_term_check(buf, len, 1) < 0 ? -EBADMSG : 0;
	if (node_term_skip(buf, len, &p) < 0)
		return -EBADMSG;
	if (ei_get_type(buf, &index, &type, &size) < 0 ||
	    (type != ERL_NEW_REFERENCE_EXT && type != ERL_NEWER_REFERENCE_EXT &&
	     type != ERL_REFERENCE_EXT) ||
	    ei_decode_ref(buf, &index, &ref) < 0 || ref.len < 3 ||
	    (ref.n[2] != REF_MAGIC && ref.n[2] != REF_MAGIC_UNCHECKED))
		return node_term_check(buf, len, 1) < 0 ? -EBADMSG : 0;
	checked = ref.n[2] == REF_MAGIC;
	if (checked && node_term_check(buf, len, p) < 0)
		return -EBADMSG;

	reply->id = (uint64_t)ref.n[0] | ((uint64_t)ref.n[1] << 18);
	reply->buf = buf;
	reply->len = len;
	reply->index = (int)p;
	reply->checked = checked;
	reply->badrpc = false;

	/* {badrpc, Reason}: small, and printed by ei; always checked */
	if (len - p >= 2 && b[p] == ERL_SMALL_TUPLE_EXT && b[p + 1] == 2) {
		size_t q = p + 2, n;
		const char *name;

		if (etf_atom(b, len, &q, &name, &n) == 0 &&
		    etf_atom_is(name, n, "badrpc", 6)) {
			if (!checked && node_term_check(buf, len, p) < 0)
				return -EBADMSG;
			reply->checked = true;
			reply->badrpc = true;
		}
	}
	return 1;
}

int
node_reply_check(const struct fp_reply *reply)
{
	if (reply->checked)
		return 0;
	return node_term_check(reply->buf, reply->len, (size_t)reply->index);
}

static int
decode_reply(struct fp_node *node, struct fp_reply *reply)
{
	int rc;

	rc = node->rx.index < 1 ? -EBADMSG :
	     node_parse_reply(node->rx.buff, (size_t)node->rx.index, reply);
	if (rc < 0) {
		fp_log(FP_LOG_WARNING, "malformed message from %s dropped (%d bytes)",
		       node->target, node->rx.index);
		return -EBADMSG;
	}
	if (rc == 1 && reply->badrpc && !node->probing &&
	    fp_log_enabled(FP_LOG_WARNING)) {
		char *s = NULL;
		int i = reply->index, arity;

		ei_decode_tuple_header(reply->buf, &i, &arity);
		ei_skip_term(reply->buf, &i);
		ei_s_print_term(&s, reply->buf, &i);
		fp_log(FP_LOG_WARNING, "rpc failed on %s: %.300s", node->target,
		       s ? s : "?");
		free(s);
	}
	return rc;
}

int
fp_node_receive(struct fp_node *node, unsigned timeout_ms,
		struct fp_reply *reply)
{
	erlang_msg msg;
	int rc;

	if (node->fd < 0)
		return -ECONNRESET;

	node->rx.index = 0;
	rc = ei_xreceive_msg_tmo(node->fd, &msg, &node->rx, timeout_ms);
	if (rc == ERL_TICK)
		return 0;
	if (rc == ERL_ERROR) {
		if (node->cancelled)
			return node_io_failed(node, -ECANCELED);
		if (erl_errno == ETIMEDOUT)
			return -ETIMEDOUT;
		if (erl_errno == EAGAIN)
			return 0;
		/* EMSGSIZE and friends: the message was read and dropped. */
		if (erl_errno == EMSGSIZE)
			return 0;
		return -ECONNRESET;
	}
	if (msg.msgtype == ERL_EXIT || msg.msgtype == ERL_EXIT2) {
		/* A sampling process of --request eval is linked to us: if
		 * one dies, start over (a new connection starts new ones)
		 * rather than send every third batch into the void. */
		if (node_helper_exited(node, &msg.from))
			return -ECONNRESET;
		for (unsigned k = 0; k < node->nsamplers; k++) {
			if (node_same_pid(&msg.from, &node->samplers[k])) {
				fp_log(FP_LOG_WARNING,
				       "%s: eval sampler <%u.%u> exited; reconnecting",
				       node->target, msg.from.num, msg.from.serial);
				return -ECONNRESET;
			}
		}
		return 0;
	}
	if (msg.msgtype != ERL_SEND && msg.msgtype != ERL_REG_SEND)
		return 0;
	rc = decode_reply(node, reply);
	if (rc == 1) {
		for (unsigned k = 0; k < node->nsamplers; k++) {
			if (node->sampler_busy[k] == reply->id)
				node->sampler_busy[k] = 0;
		}
	}
	return rc;
}

/* Wait for the reply to @id, dropping anything else. */
static int
node_wait(struct fp_node *node, uint64_t id, unsigned timeout_ms,
	  struct fp_reply *reply)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		long elapsed;
		int rc;

		clock_gettime(CLOCK_MONOTONIC, &now);
		elapsed = (now.tv_sec - start.tv_sec) * 1000 +
			  (now.tv_nsec - start.tv_nsec) / 1000000;
		if (elapsed >= (long)timeout_ms)
			return -ETIMEDOUT;
		rc = wait_fd(node, node->fd, POLLIN,
			     timeout_ms - (unsigned)elapsed);
		if (rc < 0)
			return rc;
		rc = fp_node_receive(node, timeout_ms, reply);
		if (rc < 0)
			return rc;
		if (rc == 1 && reply->id == id) {
			if (node_reply_check(reply) < 0)
				return -EBADMSG;
			return reply->badrpc ? -EPROTO : 0;
		}
	}
}

int
node_call(struct fp_node *node, const char *mod, const char *fun,
	  const ei_x_buff *args, unsigned timeout_ms, struct fp_reply *reply)
{
	uint64_t id;
	int rc;

	rc = node_rpc_send(node, mod, fun, args, &id);
	if (rc < 0)
		return rc;
	return node_wait(node, id, timeout_ms, reply);
}

static void
args_atom(ei_x_buff *x, const char *atom)
{
	x->index = 0;
	ei_x_encode_list_header(x, 1);
	ei_x_encode_atom(x, atom);
	ei_x_encode_empty_list(x);
}

static void
encode_dict_key(ei_x_buff *x, const char *key)
{
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "dictionary");
	ei_x_encode_atom(x, key);
}

/*
 * The items the node's features and fp_node_set_extras() add to the
 * signalled list. They read the process dictionary, which only the
 * process itself may read: process_info answers them through a signal
 * (measured: each costs a waiting process a reduction, as
 * current_stacktrace does), so they ride in the list that already
 * sends one, never in the instant list, and probes do without them.
 */
static void
encode_extra_items(struct fp_node *node)
{
	ei_x_buff *x = &node->extra_items;
	bool keys = node->dict_keys;

	x->index = 0;
	node->nextra_items = 0;
	if (node->label_source == FP_LABEL_ITEM) {
		ei_x_encode_atom(x, "label");
		node->nextra_items++;
	} else if (node->label_source == FP_LABEL_DICT) {
		encode_dict_key(x, "$process_label");
		node->nextra_items++;
	}
	for (size_t i = 0; keys && i < node->nkeys; i++) {
		encode_dict_key(x, node->keys[i]);
		node->nextra_items++;
	}
	if (keys && node->nlogger_keys) {
		encode_dict_key(x, "$logger_metadata$");
		node->nextra_items++;
	}
	if (keys && node->callers) {
		encode_dict_key(x, "$callers");
		node->nextra_items++;
	}
}

static int
setup_calls(struct fp_node *node, unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff args;
	erlang_pid rex;
	long wordsize;
	int rc, i, type, size;

	ei_x_new(&args);

	args_atom(&args, "rex");
	rc = node_call(node, "erlang", "whereis", &args, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_decode_pid(reply.buf, &i, &rex) < 0) {
		rc = -EPROTO;
		goto out;
	}
	node->rex.num = rex.num;
	node->rex.serial = rex.serial;
	node->creation = rex.creation;
	/* A node reached through another host name (an alias, localhost,
	 * an address) still calls itself what it was started as, and takes
	 * a pid of any other node name for a remote one: every pid we send
	 * carries the name its own rex has. */
	if (strlen(rex.node) >= sizeof(node->name)) {
		rc = -EPROTO;
		goto out;
	}
	strcpy(node->name, rex.node);

	/* process_info(P, {dictionary, Key}) (OTP 26.2 and later) reads one
	 * key without copying the dictionary; older nodes refuse the item
	 * with badarg. rex is a gen_server: it has the key asked here. */
	args.index = 0;
	ei_x_encode_list_header(&args, 2);
	ei_x_encode_pid(&args, &rex);
	encode_dict_key(&args, "$initial_call");
	ei_x_encode_empty_list(&args);
	node->probing = true;
	rc = node_call(node, "erlang", "process_info", &args, timeout_ms, &reply);
	node->probing = false;
	if (rc < 0 && rc != -EPROTO)
		goto out;
	node->dict_keys = rc == 0;

	/* process_info(P, label) (OTP 27 and later) reads proc_lib's label;
	 * before, it is '$process_label' in the dictionary, readable alone
	 * where keys are. rex has none: the answer is undefined, not badarg.
	 * A node that reads no key (before 26.2) has neither: not asked. */
	node->label_source = FP_LABEL_NONE;
	if (!node->dict_keys)
		goto probed;
	args.index = 0;
	ei_x_encode_list_header(&args, 2);
	ei_x_encode_pid(&args, &rex);
	ei_x_encode_atom(&args, "label");
	ei_x_encode_empty_list(&args);
	node->probing = true;
	rc = node_call(node, "erlang", "process_info", &args, timeout_ms, &reply);
	node->probing = false;
	if (rc < 0 && rc != -EPROTO)
		goto out;
	node->label_source = rc == 0 ? FP_LABEL_ITEM : FP_LABEL_DICT;
probed:
	encode_extra_items(node);

	args_atom(&args, "wordsize");
	rc = node_call(node, "erlang", "system_info", &args, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_decode_long(reply.buf, &i, &wordsize) < 0 ||
	    (wordsize != 4 && wordsize != 8)) {
		rc = -EPROTO;
		goto out;
	}
	node->wordsize = (unsigned)wordsize;

	args_atom(&args, "schedulers_online");
	rc = node_call(node, "erlang", "system_info", &args, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_decode_long(reply.buf, &i, &wordsize) < 0 || wordsize < 1) {
		rc = -EPROTO;
		goto out;
	}
	node->schedulers = (unsigned)wordsize;

	args_atom(&args, "otp_release");
	rc = node_call(node, "erlang", "system_info", &args, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_get_type(reply.buf, &i, &type, &size) < 0 ||
	    type != ERL_STRING_EXT || size >= (int)sizeof(node->otp_release) ||
	    ei_decode_string(reply.buf, &i, node->otp_release) < 0) {
		rc = -EPROTO;
		goto out;
	}
	rc = 0;
out:
	ei_x_free(&args);
	return rc;
}

/*
 * The eval request path (--request eval). Each sampling process is a fun
 * that the node's own erl_eval interprets: no module is loaded. It links
 * itself to this C node, so it dies with the connection, and answers
 * {flame_profd_sample, From, Ref, Pids, ItemLists} with the same
 * {Ref, {Micros, Result}} a timed rex call answers, from a process whose
 * heap stays grown between batches (rex spawns a fresh worker per call,
 * and the worker's heap grows from 233 words, garbage collecting as the
 * reply is built). Every collection is a full sweep: a batch is garbage
 * once sent, so nothing is worth an old generation, which would otherwise
 * hold megabytes for good.
 *
 * The node scans and parses the source itself (erl_scan:string/1,
 * erl_parse:parse_exprs/1): we only pass its terms back.
 */
static const char eval_sampler_source[] =
	"erlang:spawn_opt(fun() ->"
	"  true = link(Daemon),"
	"  Loop = fun Next() ->"
	"    receive"
	"      {flame_profd_sample, From, Ref, Pids, Items} ->"
	"        From ! {Ref, try timer:tc(lists, zipwith,"
	"                                  [fun erlang:process_info/2, Pids, Items])"
	"                     catch Class:Reason -> {badrpc, {'EXIT', {Class, Reason}}}"
	"                     end},"
	"        Next();"
	"      flame_profd_stop -> ok"
	"    end"
	"  end,"
	"  Loop()"
	" end, [{min_heap_size, 131072}, {fullsweep_after, 0},"
	"       {message_queue_data, off_heap}]).";

static int
start_eval_samplers(struct fp_node *node, unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff bindings, exprs;
	int rc = 0;

	ei_x_new(&bindings);
	ei_x_new(&exprs);
	node->nsamplers = 0;
	memset(node->sampler_busy, 0, sizeof(node->sampler_busy));

	rc = node_expr_parse(node, eval_sampler_source, &exprs, timeout_ms);
	if (rc < 0)
		goto out;
	/* [{'Daemon', Self}] */
	ei_x_encode_list_header(&bindings, 1);
	ei_x_encode_tuple_header(&bindings, 2);
	ei_x_encode_atom(&bindings, "Daemon");
	ei_x_encode_pid(&bindings, ei_self(&node->ec));
	ei_x_encode_empty_list(&bindings);
	for (unsigned k = 0; k < FP_EVAL_SAMPLERS; k++) {
		int index;

		rc = node_eval_call(node, &exprs, &bindings, timeout_ms, &reply);
		if (rc < 0)
			goto out;
		index = reply.index;
		if (ei_decode_pid(reply.buf, &index, &node->samplers[k]) < 0) {
			rc = -EPROTO;
			goto out;
		}
		node->nsamplers++;
	}
	node->next_sampler = 0;
	rc = 0;
out:
	if (rc < 0)
		fp_log(FP_LOG_WARNING, "%s: could not start the eval sampler: %s",
		       node->target, rc == -EPROTO ? "unexpected reply" :
		       strerror(-rc));
	ei_x_free(&bindings);
	ei_x_free(&exprs);
	return rc;
}

/* Best effort: the link ends them anyway when the connection goes. */
static void
stop_eval_samplers(struct fp_node *node)
{
	ei_x_buff x;

	ei_x_new_with_version(&x);
	ei_x_encode_atom(&x, "flame_profd_stop");
	for (unsigned k = 0; k < node->nsamplers; k++) {
		if (ei_send_tmo(node->fd, &node->samplers[k], x.buff, x.index,
				200) < 0 && node->cancelled) {
			node->cancelled = false;
			node->broken = true;
			break;
		}
	}
	node->nsamplers = 0;
	ei_x_free(&x);
}

int
fp_node_connect(struct fp_node *node, unsigned timeout_ms)
{
	struct in_addr addr;
	char host[128];
	char alive[32];
	unsigned port = 0, creation;
	int rc, fd;

	fp_node_disconnect(node);
	node->cancelled = false;

	if (!ei_initialised) {
		ei_init();
		ei_initialised = 1;
	}

	if (node->via_host) {
		rc = resolve_ipv4(node->via_host, &addr);
		if (rc < 0)
			return rc;
		port = node->via_port;
	} else {
		rc = resolve_ipv4(node->host, &addr);
		if (rc < 0)
			return rc;
		rc = epmd_lookup(node, &addr, node->alive, timeout_ms, &port);
		if (rc < 0)
			return rc;
	}

	make_self_name(node, &addr, host, sizeof(host));
	snprintf(alive, sizeof(alive), "flame_profd_%ld", (long)getpid());
	snprintf(node->self_name, sizeof(node->self_name), "%s@%s", alive, host);
	/* A new creation per connection, even two in one second: a pid or
	 * ref of ours from an earlier connection never matches a new one
	 * (nor links a late-spawned eval sampler to it). */
	creation = (unsigned)(((time(NULL) ^ (getpid() << 8)) +
			       (++node->connects << 20)) & 0x3fffffff) | 4;
	if (ei_connect_xinit_ussi(&node->ec, host, alive, node->self_name, NULL,
				  node->cookie, creation, &node_io_callbacks,
				  sizeof(node_io_callbacks), node) < 0)
		return -EIO;

	fd = ei_xconnect_host_port_tmo(&node->ec, &addr, (int)port, timeout_ms);
	if (fd < 0) {
		int err = erl_errno;

		if (node->cancelled) {
			node->cancelled = false;
			return -ECANCELED;
		}
		if (err == ETIMEDOUT)
			return -ETIMEDOUT;
		if (err == ECONNREFUSED)
			return -ECONNREFUSED;
		/* epmd knew the node and the TCP connection opened: a failed
		 * handshake is the node saying no. */
		return -EACCES;
	}
	node->fd = fd;
	node->local = fd_is_local(fd);

	rc = setup_calls(node, timeout_ms);
	node->path_now = node->path;
	if (node->path == FP_REQUEST_HELPER && node->helper_refused)
		node->path_now = FP_REQUEST_REX;
	if (rc == 0 && node->path_now == FP_REQUEST_EVAL)
		rc = start_eval_samplers(node, timeout_ms);
	if (rc == 0 && node->path_now == FP_REQUEST_HELPER) {
		rc = node_helper_start(node, timeout_ms);
		if (rc == -ENOEXEC) {
			/* a module built by a newer erlc than the node's: the
			 * stock path needs none */
			fp_log(FP_LOG_WARNING, "%s (OTP %s) would not load the helper module; sampling through rex, which needs no module",
			       node->target, node->otp_release);
			node->helper_refused = true;
			node->path_now = FP_REQUEST_REX;
			rc = 0;
		}
	}
	if (rc < 0) {
		fp_node_disconnect(node);
		return rc == -ETIMEDOUT || rc == -ECONNRESET ||
		       rc == -ECANCELED ? rc : -EPROTO;
	}
	return 0;
}

void
node_encode_local_pid(struct fp_node *node, ei_x_buff *x, struct fp_pid pid)
{
	erlang_pid p;

	memset(&p, 0, sizeof(p));
	snprintf(p.node, sizeof(p.node), "%s", fp_node_name(node));
	p.num = pid.num;
	p.serial = pid.serial;
	p.creation = node->creation;
	ei_x_encode_pid(x, &p);
}

/* The bytes of one pid of the target: all of them have the same size. */
static size_t
local_pid_size(struct fp_node *node)
{
	erlang_pid p;
	int index = 0;

	memset(&p, 0, sizeof(p));
	snprintf(p.node, sizeof(p.node), "%s", node->target);
	p.creation = node->creation;
	ei_encode_pid(NULL, &index, &p);
	return (size_t)index;
}

void
node_encode_pid_list(struct fp_node *node, ei_x_buff *x, const struct fp_pid *pids,
		size_t n)
{
	if (n) {
		node_x_reserve(x, 6 + n * local_pid_size(node));
		ei_x_encode_list_header(x, (long)n);
		for (size_t i = 0; i < n; i++)
			node_encode_local_pid(node, x, pids[i]);
	}
	ei_x_encode_empty_list(x);
}

static void
encode_export_fun(ei_x_buff *x, const char *mod, const char *fun, long arity)
{
	erlang_fun f;

	memset(&f, 0, sizeof(f));
	f.type = EI_FUN_EXPORT;
	f.arity = arity;
	snprintf(f.module, sizeof(f.module), "%s", mod);
	f.u.exprt.func = (char *)fun;
	ei_x_encode_fun(x, &f);
}

int
fp_node_whereis_request(struct fp_node *node, const char *const *names,
			size_t n, uint64_t *id)
{
	ei_x_buff args;
	int rc;

	ei_x_new(&args);
	ei_x_encode_list_header(&args, 2);
	encode_export_fun(&args, "erlang", "whereis", 1);
	if (n) {
		size_t bytes = 6;

		for (size_t i = 0; i < n; i++)
			bytes += 3 + strlen(names[i]);
		node_x_reserve(&args, bytes);
		ei_x_encode_list_header(&args, (long)n);
		for (size_t i = 0; i < n; i++)
			ei_x_encode_atom_as(&args, names[i], ERLANG_UTF8, ERLANG_UTF8);
	}
	ei_x_encode_empty_list(&args);
	ei_x_encode_empty_list(&args);
	rc = node_rpc_send(node, "lists", "map", &args, id);
	ei_x_free(&args);
	return rc;
}

int
fp_node_alive_request(struct fp_node *node, const struct fp_pid *pids,
		      size_t n, uint64_t *id)
{
	ei_x_buff args;
	int rc;

	ei_x_new(&args);
	ei_x_encode_list_header(&args, 2);
	encode_export_fun(&args, "erlang", "is_process_alive", 1);
	node_encode_pid_list(node, &args, pids, n);
	ei_x_encode_empty_list(&args);
	rc = node_rpc_send(node, "lists", "map", &args, id);
	ei_x_free(&args);
	return rc;
}

int
fp_node_decode_bools(const struct fp_reply *reply, bool *out, size_t n)
{
	const char *buf = reply->buf;
	int index = reply->index, count;
	char atom[MAXATOMLEN_UTF8];

	if (reply->badrpc || node_reply_check(reply) < 0 ||
	    ei_decode_list_header(buf, &index, &count) < 0 || (size_t)count != n)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		if (node_decode_atom(buf, &index, atom) < 0)
			return -EBADMSG;
		if (strcmp(atom, "true") == 0)
			out[i] = true;
		else if (strcmp(atom, "false") == 0)
			out[i] = false;
		else
			return -EBADMSG;
	}
	return 0;
}

int
fp_node_initial_call_request(struct fp_node *node, const struct fp_pid *pids,
			     size_t n, uint64_t *id)
{
	ei_x_buff args;
	int rc;

	ei_x_new(&args);
	if (node->dict_keys) {
		/* lists:zipwith(fun erlang:process_info/2, Pids,
		 *               [{dictionary, '$initial_call'}, ...]):
		 * one key, read without copying the dictionary */
		ei_x_encode_list_header(&args, 3);
		encode_export_fun(&args, "erlang", "process_info", 2);
		node_encode_pid_list(node, &args, pids, n);
		if (n) {
			ei_x_encode_list_header(&args, (long)n);
			for (size_t i = 0; i < n; i++)
				encode_dict_key(&args, "$initial_call");
		}
		ei_x_encode_empty_list(&args);
		ei_x_encode_empty_list(&args);
		rc = node_rpc_send_timed(node, "lists", "zipwith", &args, id, false);
	} else {
		ei_x_encode_list_header(&args, 2);
		encode_export_fun(&args, "proc_lib", "initial_call", 1);
		node_encode_pid_list(node, &args, pids, n);
		ei_x_encode_empty_list(&args);
		rc = node_rpc_send_timed(node, "lists", "map", &args, id, false);
	}
	ei_x_free(&args);
	return rc;
}

bool
fp_node_reads_dict_keys(const struct fp_node *node)
{
	return node->dict_keys;
}

/*
 * A fully sampled process is asked twice, in one zipwith over
 * [P1, P1, P2, P2, ...]: first for its status (and its names), which the
 * caller may read from the process's state, then for everything else. A
 * process that answers a signal is running while it does, and
 * current_stacktrace, memory and total_heap_size always make it answer
 * one (OTP's process_info_bif()): asked together, status never reads
 * runnable; asked apart, it does whenever the process sits in a run queue
 * with no signals in flight. The counters go with the stack, so that they
 * all come from one moment (total_heap_size >= heap_size, and so on). The
 * order within a list the decoder expects nothing of: it reads by key.
 *
 * A probed process is asked once, for items that need no signal: a
 * process that is not running answers without being scheduled, and its
 * reductions do not move (each signal it handles costs it one).
 */
static const char *const instant_items[] = {
	"status",
	"registered_name",
};

static const char *const signalled_items[] = {
	"current_stacktrace",
	"reductions",
	"memory",
	"message_queue_len",
	"total_heap_size",
	"heap_size",
	"stack_size",
	"garbage_collection",
	"garbage_collection_info",
};

static const char *const probe_items[] = {
	"status",
	"registered_name",
	"reductions",
	"message_queue_len",
	"heap_size",
	"stack_size",
	"garbage_collection",
};

#define NITEMS(a) (sizeof(a) / sizeof((a)[0]))

static void
encode_atoms(ei_x_buff *x, const char *const *atoms, size_t n, bool ic)
{
	size_t bytes = 6 + (ic ? 3 + strlen("initial_call") : 0);

	/* one of a request's item lists: reserved one list at a time,
	 * the buffer still grows geometrically over the request */
	for (size_t k = 0; k < n; k++)
		bytes += 3 + strlen(atoms[k]);
	node_x_reserve(x, bytes);
	ei_x_encode_list_header(x, (long)(n + ic));
	for (size_t k = 0; k < n; k++)
		ei_x_encode_atom(x, atoms[k]);
	if (ic)
		ei_x_encode_atom(x, "initial_call");
	ei_x_encode_empty_list(x);
}

static void
encode_signalled(const struct fp_node *node, ei_x_buff *x)
{
	size_t bytes = 6 + (size_t)node->extra_items.index;

	if (!node->nextra_items) {
		encode_atoms(x, signalled_items, NITEMS(signalled_items), false);
		return;
	}
	for (size_t k = 0; k < NITEMS(signalled_items); k++)
		bytes += 3 + strlen(signalled_items[k]);
	node_x_reserve(x, bytes);
	ei_x_encode_list_header(x, (long)NITEMS(signalled_items) + node->nextra_items);
	for (size_t k = 0; k < NITEMS(signalled_items); k++)
		ei_x_encode_atom(x, signalled_items[k]);
	ei_x_append_buf(x, node->extra_items.buff, node->extra_items.index);
	ei_x_encode_empty_list(x);
}

void
node_encode_item_sets(const struct fp_node *node, ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 3);
	encode_atoms(x, instant_items, NITEMS(instant_items), false);
	encode_signalled(node, x);
	encode_atoms(x, probe_items, NITEMS(probe_items), false);
}

static enum fp_ask
ask_of(const enum fp_ask *asks, size_t i)
{
	return asks ? asks[i] : FP_ASK_FULL;
}

size_t
fp_node_sample_lists(const enum fp_ask *asks, size_t n)
{
	size_t lists = 0;

	for (size_t i = 0; i < n; i++)
		lists += ask_of(asks, i) == FP_ASK_PROBE ? 1 : 2;
	return lists;
}

/* the pids of a sample request: twice each, but probed ones once */
static void
encode_sample_pids(struct fp_node *node, ei_x_buff *x, const struct fp_pid *pids,
		   const enum fp_ask *asks, size_t n)
{
	size_t lists = fp_node_sample_lists(asks, n);

	if (lists) {
		node_x_reserve(x, 6 + lists * local_pid_size(node));
		ei_x_encode_list_header(x, (long)lists);
		for (size_t i = 0; i < n; i++) {
			node_encode_local_pid(node, x, pids[i]);
			if (ask_of(asks, i) != FP_ASK_PROBE)
				node_encode_local_pid(node, x, pids[i]);
		}
	}
	ei_x_encode_empty_list(x);
}

static void
encode_item_lists(const struct fp_node *node, ei_x_buff *x,
		  const enum fp_ask *asks, size_t n)
{
	size_t lists = fp_node_sample_lists(asks, n);

	if (lists) {
		ei_x_encode_list_header(x, (long)lists);
		for (size_t i = 0; i < n; i++) {
			enum fp_ask ask = ask_of(asks, i);

			if (ask == FP_ASK_PROBE) {
				encode_atoms(x, probe_items, NITEMS(probe_items), false);
				continue;
			}
			encode_atoms(x, instant_items, NITEMS(instant_items),
				     ask == FP_ASK_FULL_IC);
			encode_signalled(node, x);
		}
	}
	ei_x_encode_empty_list(x);
}

/* {flame_profd_sample, Self, Ref, Pids, ItemLists} to a sampling process */
static int
eval_sample_send(struct fp_node *node, const struct fp_pid *pids,
		 const enum fp_ask *asks, size_t n, uint64_t *id)
{
	ei_x_buff *x = &node->tx;
	unsigned k = node->next_sampler;
	erlang_pid *to;
	int rc;

	if (node->fd < 0 || node->nsamplers == 0)
		return -ENOTCONN;
	/* a free one if there is one: a batch never queues behind a sampler
	 * still waiting on a slow process (or on a request given up on) */
	for (unsigned i = 0; i < node->nsamplers; i++) {
		unsigned c = (node->next_sampler + i) % node->nsamplers;

		if (!node->sampler_busy[c]) {
			k = c;
			break;
		}
	}
	k %= node->nsamplers;
	node->next_sampler = k + 1;
	to = &node->samplers[k];
	x->index = 0;
	ei_x_encode_version(x);
	ei_x_encode_tuple_header(x, 5);
	ei_x_encode_atom(x, "flame_profd_sample");
	ei_x_encode_pid(x, ei_self(&node->ec));
	*id = ++node->next_id;
	node_encode_ref(node, x, *id, true);
	encode_sample_pids(node, x, pids, asks, n);
	encode_item_lists(node, x, asks, n);
	node->sampler_busy[k] = *id;
	rc = ei_send_tmo(node->fd, to, x->buff, x->index, 10000);
	if (rc < 0)
		return node_io_failed(node, erl_errno == ETIMEDOUT ? -ETIMEDOUT :
						     -ECONNRESET);
	return 0;
}

int
fp_node_sample_request(struct fp_node *node, const struct fp_pid *pids,
		       const enum fp_ask *asks, size_t n, uint64_t *id)
{
	ei_x_buff args;
	int rc;

	if (node->path_now == FP_REQUEST_EVAL)
		return eval_sample_send(node, pids, asks, n, id);

	ei_x_new(&args);
	ei_x_encode_list_header(&args, 3);
	encode_export_fun(&args, "erlang", "process_info", 2);
	encode_sample_pids(node, &args, pids, asks, n);
	encode_item_lists(node, &args, asks, n);
	ei_x_encode_empty_list(&args);
	rc = node_rpc_send_timed(node, "lists", "zipwith", &args, id, true);
	ei_x_free(&args);
	return rc;
}

int
fp_node_decode_whereis(const struct fp_reply *reply, struct fp_pid *out,
		       bool *found, size_t n)
{
	const char *buf = reply->buf;
	int index = reply->index, count, type, size;

	if (reply->badrpc || node_reply_check(reply) < 0 ||
	    ei_decode_list_header(buf, &index, &count) < 0 || count < 0 ||
	    (size_t)count != n)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		if (ei_get_type(buf, &index, &type, &size) < 0)
			return -EBADMSG;
		found[i] = type == ERL_PID_EXT || type == ERL_NEW_PID_EXT;
		if (found[i] ? node_decode_pid(buf, &index, &out[i]) < 0 :
			       node_skip_term(buf, &index) < 0)
			return -EBADMSG;
	}
	return 0;
}
