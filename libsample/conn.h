/*
 * flame_profd — the connection to the node: private to libsample.
 *
 * Three files, one layer: conn-io.c (ei's socket callbacks and the waits
 * in slices of FP_NODE_SLICE_MS), conn-epmd.c (the port from epmd, the
 * name we take), conn.c (the handshake, the rpc envelope, sending and
 * receiving). The layer knows no request path: what a path must hear of
 * (exit signals, replies) it reaches through node->ops (path.h). The
 * node_*() functions are what the rest of libsample calls; conn_*() stay
 * inside the layer.
 */
#pragma once

#include <ei.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "fp/node.h"

/* The tag in the third word of our references: lets us tell our own
 * replies from anything else a confused peer might send. */
#define REF_MAGIC 0x66707264u	/* "fprd" */
/* The same for requests whose reply the caller checks as it decodes
 * (sample batches: see fp_reply.checked). */
#define REF_MAGIC_UNCHECKED 0x66707275u	/* "fpru" */

/* conn-io.c */

/*
 * Wait for @events on @fd, at most @timeout_ms (0: no limit), in slices:
 * whenever the fd is not ready, the node's give_up (if @node) is asked. 0 when
 * ready (or in error: the read or write that follows reports it),
 * -ETIMEDOUT, -ECANCELED, or a negative errno.
 */
int
conn_wait_fd(struct fp_node *node, int fd, short events, unsigned timeout_ms);

/* ei's socket callbacks for our connections (setup context: the node). */
extern ei_socket_callbacks conn_io_callbacks;

/* conn-epmd.c */

/* The first IPv4 address of @host: 0, or -EHOSTUNREACH. */
int
conn_resolve_ipv4(const char *host, struct in_addr *addr);

/* The distribution port of @alive from the epmd at @addr: 0,
 * -ECONNREFUSED (no epmd), -ENOENT (no such node), -EPROTO, -ETIMEDOUT
 * or -ECANCELED. */
int
conn_epmd_lookup(struct fp_node *node, const struct in_addr *addr,
		 const char *alive, unsigned timeout_ms, unsigned *port);

/* The host part of our own node name, of the kind the target's has. */
void
conn_self_host(const struct fp_node *node, const struct in_addr *target_addr,
	       char *host, size_t hostlen);

/* Both ends of the connection on this host (fp_node_is_local()). */
bool
conn_fd_is_local(int fd);

/* conn.c */

/* Close what was open, then reach the node (epmd or --connect) and shake
 * hands: 0 with node->fd set, or as fp_node_connect(). No call made. */
int
conn_open(struct fp_node *node, unsigned timeout_ms);

/* The same process: numbers, creation and node. */
bool
node_same_pid(const erlang_pid *a, const erlang_pid *b);

/* A reference of ours carrying @id (checked replies unless @unchecked). */
void
node_encode_ref(struct fp_node *node, ei_x_buff *x, uint64_t id, bool unchecked);

/* Room for @more bytes past x->index, the buffer doubled if it grows:
 * call before a long run of encodes into one buffer. */
void
node_x_reserve(ei_x_buff *x, size_t more);

/* The rpc message of mod:fun(args...) (args an encoded list) into @x,
 * replacing what it held, under reference @id; @timed wraps it in
 * timer:tc/3. */
void
node_rpc_encode(struct fp_node *node, ei_x_buff *x, const char *mod,
		const char *fun, const ei_x_buff *args, uint64_t id,
		bool unchecked, bool timed);

/* Send an rpc of mod:fun(args...) with args an encoded list. */
int
node_rpc_send(struct fp_node *node, const char *mod, const char *fun,
	      const ei_x_buff *args, uint64_t *id);

/* The same wrapped in timer:tc/3: the reply is {Microseconds, Result}
 * (fp_reply_take_time()); @unchecked as node_encode_ref(). */
int
node_rpc_send_timed(struct fp_node *node, const char *mod, const char *fun,
		    const ei_x_buff *args, uint64_t *id, bool unchecked);

/* Send the message in @x (version byte included) to @to: 0, or as the
 * requests of fp/node.h. */
int
node_send(struct fp_node *node, erlang_pid *to, const ei_x_buff *x);

/* Send mod:fun(args...) through rex and wait for its checked reply:
 * 0, -EPROTO for {badrpc, _}, or as fp_node_receive(). */
int
node_call(struct fp_node *node, const char *mod, const char *fun,
	  const ei_x_buff *args, unsigned timeout_ms, struct fp_reply *reply);

/* After an ei call on the connection failed with @err: if a wait inside
 * it was given up, it may have cut a message in two and the stream is of
 * no more use: closed, -ECANCELED. Otherwise @err. */
int
node_io_failed(struct fp_node *node, int err);

/*
 * Recognise a reply to one of our requests: 1 (reply filled), 0 (a
 * well-formed message that is not ours), -EBADMSG (malformed). Every
 * message is checked (etf_term_check()) except the result of a request
 * sent unchecked, which is left to its decoder (reply->checked false).
 */
int
node_parse_reply(const char *buf, size_t len, struct fp_reply *reply);
