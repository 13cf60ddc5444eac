/*
 * flame_profd — the connection: handshake, rpc envelope, send, receive.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ei.h>

#include "conn.h"
#include "etf.h"
#include "fp/log.h"
#include "node-private.h"
#include "path.h"
#include "util-mem.h"

static int ei_initialised;

bool
node_same_pid(const erlang_pid *a, const erlang_pid *b)
{
	return a->num == b->num && a->serial == b->serial &&
	       a->creation == b->creation && strcmp(a->node, b->node) == 0;
}

int
conn_open(struct fp_node *node, unsigned timeout_ms)
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
		rc = conn_resolve_ipv4(node->via_host, &addr);
		if (rc < 0)
			return rc;
		port = node->via_port;
	} else {
		rc = conn_resolve_ipv4(node->host, &addr);
		if (rc < 0)
			return rc;
		rc = conn_epmd_lookup(node, &addr, node->alive, timeout_ms, &port);
		if (rc < 0)
			return rc;
	}

	conn_self_host(node, &addr, host, sizeof(host));
	snprintf(alive, sizeof(alive), "flame_profd_%ld", (long)getpid());
	snprintf(node->self_name, sizeof(node->self_name), "%s@%s", alive, host);
	/* A new creation per connection, even two in one second: a pid or
	 * ref of ours from an earlier connection never matches a new one
	 * (nor links a late-spawned eval sampler to it). */
	creation = (unsigned)(((time(NULL) ^ (getpid() << 8)) +
			       (++node->connects << 20)) & 0x3fffffff) | 4;
	if (ei_connect_xinit_ussi(&node->ec, host, alive, node->self_name, NULL,
				  node->cookie, creation, &conn_io_callbacks,
				  sizeof(conn_io_callbacks), node) < 0)
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
	node->local = conn_fd_is_local(fd);
	return 0;
}

/*
 * The path in use hears of the end first (node->ops->stop) while the
 * stream may still carry a goodbye, unless a give-up cut it mid-message.
 */
void
fp_node_disconnect(struct fp_node *node)
{
	if (node->fd < 0)
		return;
	if (node->ops && node->ops->stop)
		node->ops->stop(node);
	node->ops = NULL;
	/* a give-up in there may have closed it already */
	if (node->fd >= 0)
		ei_close_connection(node->fd);
	node->fd = -1;
	node->broken = false;
	/* the janitor and the watcher see the connection go */
	node->depth_attached = false;
	node->watch_id = 0;
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
node_send(struct fp_node *node, erlang_pid *to, const ei_x_buff *x)
{
	if (node->fd < 0)
		return -ENOTCONN;
	if (ei_send_tmo(node->fd, to, x->buff, x->index, 10000) < 0)
		return node_io_failed(node, erl_errno == ETIMEDOUT ? -ETIMEDOUT :
						     -ECONNRESET);
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
		return etf_term_check(buf, len, 1) < 0 ? -EBADMSG : 0;
	if (etf_term_skip(buf, len, &p) < 0)
		return -EBADMSG;
	if (ei_get_type(buf, &index, &type, &size) < 0 ||
	    (type != ERL_NEW_REFERENCE_EXT && type != ERL_NEWER_REFERENCE_EXT &&
	     type != ERL_REFERENCE_EXT) ||
	    ei_decode_ref(buf, &index, &ref) < 0 || ref.len < 3 ||
	    (ref.n[2] != REF_MAGIC && ref.n[2] != REF_MAGIC_UNCHECKED))
		return etf_term_check(buf, len, 1) < 0 ? -EBADMSG : 0;
	checked = ref.n[2] == REF_MAGIC;
	if (checked && etf_term_check(buf, len, p) < 0)
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
			if (!checked && etf_term_check(buf, len, p) < 0)
				return -EBADMSG;
			reply->checked = true;
			reply->badrpc = true;
		}
	}
	return 1;
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
		char *s;
		int i = reply->index, arity;

		/* the reason is the node's text (an application's atoms
		 * and strings): escaped, so it stays within its line */
		ei_decode_tuple_header(reply->buf, &i, &arity);
		ei_skip_term(reply->buf, &i);
		s = etf_term_text(reply->buf, i, 300);
		fp_log(FP_LOG_WARNING, "rpc failed on %s: %s", node->target, s);
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
		if (node_watcher_exited(node, &msg.from))
			return 0;
		/* the processes a path started on the node are linked to us:
		 * whether one's end ends the connection is the path's call */
		if (node->ops && node->ops->exited &&
		    node->ops->exited(node, &msg.from))
			return -ECONNRESET;
		return 0;
	}
	if (msg.msgtype != ERL_SEND && msg.msgtype != ERL_REG_SEND)
		return 0;
	rc = decode_reply(node, reply);
	if (rc == 1 && node->ops && node->ops->replied)
		node->ops->replied(node, reply->id);
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
		rc = conn_wait_fd(node, node->fd, POLLIN,
			     timeout_ms - (unsigned)elapsed);
		if (rc < 0)
			return rc;
		rc = fp_node_receive(node, timeout_ms, reply);
		if (rc < 0)
			return rc;
		if (rc == 1 && reply->id == id) {
			if (etf_reply_check(reply) < 0)
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

