/*
 * flame_profd — the socket under ei: every wait in slices.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <ei.h>

#include "conn.h"
#include "node-private.h"
#include "util-mem.h"

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int
conn_wait_fd(struct fp_node *node, int fd, short events, unsigned timeout_ms)
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
		if (node && node->give_up && node->give_up(node->give_up_data))
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
 * socket is non-blocking; each call waits in conn_wait_fd()'s slices. A wait
 * given up answers ETIMEDOUT, which ei passes on, and marks the node
 * (node_io_failed(), conn.h).
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
	int rc = conn_wait_fd(io->node, io->fd, events, io_tmo(tmo));

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

ei_socket_callbacks conn_io_callbacks = {
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

