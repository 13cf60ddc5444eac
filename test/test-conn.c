/*
 * flame_profd — unit tests: the connection's framing, over a socket pair;
 * epmd's list of names, from a fake epmd.
 *
 * The far end of the pair speaks what a node sends after the handshake:
 * 4-byte lengths, ticks (length 0), and pass-through frames of a control
 * message and a payload. The near end is a node handle whose fd is our
 * socket; fp_node_receive() reads it through ei, as on a real connection.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ei.h>

#include "fp-test.h"
#include "conn.h"
#include "etf.h"
#include "node-private.h"
#include "path.h"

#define TARGET "app@host"
#define PASS_THROUGH 112	/* 'p': a frame of control + payload */

struct pair {
	struct fp_node *node;
	int peer;		/* the node's end of the socket pair */
};

static struct pair
pair_new(void)
{
	struct pair p;
	int sv[2];

	fp_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ei_init();
	p.node = fp_node_new(TARGET, "cookie");
	snprintf(p.node->self_name, sizeof(p.node->self_name), "fpd@host");
	fp_assert_int_eq(ei_connect_xinit(&p.node->ec, "host", "fpd", "fpd@host",
					  NULL, "cookie", 77), 0);
	p.node->fd = sv[0];
	p.peer = sv[1];
	return p;
}

static void
pair_free(struct pair *p)
{
	/* the handle closes its end as a connection (fp_node_disconnect()) */
	fp_node_destroy(p->node);
	if (p->peer >= 0)
		close(p->peer);
}

static void
write_all(int fd, const void *buf, size_t len)
{
	const char *b = buf;

	while (len) {
		ssize_t n = write(fd, b, len);

		fp_assert(n > 0);
		b += n;
		len -= (size_t)n;
	}
}

static void
read_all(int fd, void *buf, size_t len)
{
	char *b = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		fp_assert_int_eq(poll(&pfd, 1, 2000), 1);
		n = read(fd, b, len);
		fp_assert(n > 0);
		b += n;
		len -= (size_t)n;
	}
}

static void
put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* What the node sends: a length, PASS_THROUGH, the control message and
 * the payload (each with its version byte). Caller frees. */
static unsigned char *
frame(const ei_x_buff *control, const ei_x_buff *payload, size_t *len)
{
	size_t body = 1 + (size_t)control->index + (size_t)payload->index;
	unsigned char *f = malloc(4 + body);

	put_be32(f, (uint32_t)body);
	f[4] = PASS_THROUGH;
	memcpy(f + 5, control->buff, (size_t)control->index);
	memcpy(f + 5 + control->index, payload->buff, (size_t)payload->index);
	*len = 4 + body;
	return f;
}

/* {SEND, '', Self}: a message to our pid, as a node's reply comes. */
static void
control_send(struct fp_node *node, ei_x_buff *x)
{
	ei_x_new_with_version(x);
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_long(x, ERL_SEND);
	ei_x_encode_atom(x, "");
	ei_x_encode_pid(x, ei_self(&node->ec));
}

/* {EXIT, From, Self, Reason} */
static void
control_exit(struct fp_node *node, ei_x_buff *x, const erlang_pid *from)
{
	ei_x_new_with_version(x);
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_long(x, ERL_EXIT);
	ei_x_encode_pid(x, from);
	ei_x_encode_pid(x, ei_self(&node->ec));
	ei_x_encode_atom(x, "killed");
}

/* {Ref, {ok, 42}} under a reference of ours carrying @id, or a foreign
 * one; @cut drops the last bytes of the term. */
static void
payload_reply(struct fp_node *node, ei_x_buff *x, uint64_t id, bool ours,
	      int cut)
{
	ei_x_new_with_version(x);
	ei_x_encode_tuple_header(x, 2);
	if (ours) {
		node_encode_ref(node, x, id, false);
	} else {
		erlang_ref ref = { .len = 3, .n = { 1, 2, 3 }, .creation = 1 };

		snprintf(ref.node, sizeof(ref.node), TARGET);
		ei_x_encode_ref(x, &ref);
	}
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "ok");
	ei_x_encode_long(x, 42);
	x->index -= cut;
}

static void
send_frame(struct pair *p, ei_x_buff *control, ei_x_buff *payload)
{
	size_t len;
	unsigned char *f = frame(control, payload, &len);

	write_all(p->peer, f, len);
	free(f);
	ei_x_free(control);
	ei_x_free(payload);
}

START_TEST(tick_answered)
{
	struct pair p = pair_new();
	unsigned char tick[4] = { 0 }, tock[4] = { 1, 1, 1, 1 };
	struct fp_reply reply;

	write_all(p.peer, tick, sizeof(tick));
	fp_assert_int_eq(fp_node_receive(p.node, 1000, &reply), 0);
	/* a node that hears nothing back takes us for dead */
	read_all(p.peer, tock, sizeof(tock));
	fp_assert_int_eq(tock[0] | tock[1] | tock[2] | tock[3], 0);
	pair_free(&p);
}
END_TEST

/* 0: ours; 1: another's reference; 2: a term cut short inside a frame
 * whose length is right (dropped with a warning) */
START_TEST(reply_recognised)
{
	struct pair p = pair_new();
	ei_x_buff control, payload;
	struct fp_reply reply;
	static const int want[] = { 1, 0, -EBADMSG };
	int64_t v;
	int start, end;

	control_send(p.node, &control);
	payload_reply(p.node, &payload, 77, _i != 1, _i == 2 ? 1 : 0);
	send_frame(&p, &control, &payload);
	fp_assert_int_eq(fp_node_receive(p.node, 1000, &reply), want[_i]);
	if (_i == 0) {
		fp_assert(reply.id == 77);
		fp_assert(reply.checked);
		fp_assert(!reply.badrpc);
		fp_assert_int_eq(etf_reply_element(&reply, "ok", &start, &end), 0);
		fp_assert_int_eq(etf_decode_int(reply.buf, &start, &v), 0);
		fp_assert(v == 42);
	}
	/* the stream is still in step: a tick after it reads as one */
	write_all(p.peer, "\0\0\0\0", 4);
	fp_assert_int_eq(fp_node_receive(p.node, 1000, &reply), 0);
	pair_free(&p);
}
END_TEST

struct late_write {
	int fd;
	const unsigned char *buf;
	size_t len;
};

static void *
write_later(void *arg)
{
	struct late_write *w = arg;
	struct timespec ts = { 0, 30 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	write_all(w->fd, w->buf, w->len);
	return NULL;
}

/* A frame that arrives in pieces, cut in its length, its control message
 * or its payload, is one message. */
START_TEST(frame_in_pieces)
{
	struct pair p = pair_new();
	ei_x_buff control, payload;
	struct fp_reply reply;
	struct late_write w;
	pthread_t t;
	unsigned char *f;
	size_t len, cut;

	control_send(p.node, &control);
	payload_reply(p.node, &payload, 9, true, 0);
	f = frame(&control, &payload, &len);
	cut = _i == 0 ? 2 : _i == 1 ? 4 + 1 + (size_t)control.index / 2 : len - 3;
	write_all(p.peer, f, cut);
	w = (struct late_write){ p.peer, f + cut, len - cut };
	fp_assert_int_eq(pthread_create(&t, NULL, write_later, &w), 0);
	fp_assert_int_eq(fp_node_receive(p.node, 2000, &reply), 1);
	pthread_join(t, NULL);
	fp_assert(reply.id == 9);
	free(f);
	ei_x_free(&control);
	ei_x_free(&payload);
	pair_free(&p);
}
END_TEST

START_TEST(peer_gone)
{
	struct pair p = pair_new();
	struct fp_reply reply;

	close(p.peer);
	p.peer = -1;
	fp_assert_int_eq(fp_node_receive(p.node, 1000, &reply), -ECONNRESET);
	pair_free(&p);
}
END_TEST

START_TEST(nothing_times_out)
{
	struct pair p = pair_new();
	struct fp_reply reply;

	fp_assert_int_eq(fp_node_receive(p.node, 50, &reply), -ETIMEDOUT);
	pair_free(&p);
}
END_TEST

static bool
give_up_now(void *data)
{
	(*(int *)data)++;
	return true;
}

/* A wait asks the caller between slices, not only at the end. */
START_TEST(wait_gives_up)
{
	struct pair p = pair_new();
	int asked = 0;

	fp_node_set_give_up(p.node, give_up_now, &asked);
	fp_assert_int_eq(conn_wait_fd(p.node, p.node->fd, POLLIN, 5000),
			 -ECANCELED);
	fp_assert_int_eq(asked, 1);
	pair_free(&p);
}
END_TEST

/*
 * The path in use hears of exits and replies through its interface: an
 * eval sampler's exit ends the connection, another process's does not;
 * a reply frees the sampler that was busy with it.
 */
START_TEST(path_hears_exits_and_replies)
{
	struct pair p = pair_new();
	ei_x_buff control, payload;
	struct fp_reply reply;
	erlang_pid sampler, other;

	memset(&sampler, 0, sizeof(sampler));
	snprintf(sampler.node, sizeof(sampler.node), TARGET);
	sampler.num = 101;
	sampler.creation = 3;
	other = sampler;
	other.num = 102;
	p.node->ops = &node_path_eval;
	p.node->samplers[0] = sampler;
	p.node->nsamplers = 1;
	p.node->sampler_busy[0] = 5;

	control_send(p.node, &control);
	payload_reply(p.node, &payload, 5, true, 0);
	send_frame(&p, &control, &payload);
	fp_assert_int_eq(fp_node_receive(p.node, 1000, &reply), 1);
	fp_assert(p.node->sampler_busy[0] == 0);

	control_exit(p.node, &control, &other);
	ei_x_new_with_version(&payload);
	send_frame(&p, &control, &payload);
	fp_assert_int_eq(fp_node_receive(p.node, 1000, &reply), 0);

	control_exit(p.node, &control, &sampler);
	ei_x_new_with_version(&payload);
	send_frame(&p, &control, &payload);
	fp_assert_int_eq(fp_node_receive(p.node, 1000, &reply), -ECONNRESET);
	pair_free(&p);
}
END_TEST

/* An rpc goes out as {REG_SEND, Self, '', rex} and the $gen_call. */
START_TEST(rpc_framed)
{
	struct pair p = pair_new();
	unsigned char len4[4], *body;
	char atom[MAXATOMLEN_UTF8];
	ei_x_buff args;
	erlang_pid from;
	erlang_ref ref;
	uint64_t id;
	uint32_t len;
	long tag;
	int index, arity;

	ei_x_new(&args);
	ei_x_encode_list_header(&args, 1);
	ei_x_encode_atom(&args, "rex");
	ei_x_encode_empty_list(&args);
	fp_assert_int_eq(node_rpc_send(p.node, "erlang", "whereis", &args, &id), 0);
	ei_x_free(&args);

	read_all(p.peer, len4, 4);
	len = ((uint32_t)len4[0] << 24) | ((uint32_t)len4[1] << 16) |
	      ((uint32_t)len4[2] << 8) | len4[3];
	fp_assert(len > 1 && len < 4096);
	body = malloc(len);
	read_all(p.peer, body, len);
	fp_assert_int_eq(body[0], PASS_THROUGH);

	index = 1;
	fp_assert_int_eq(ei_decode_version((char *)body, &index, NULL), 0);
	fp_assert_int_eq(ei_decode_tuple_header((char *)body, &index, &arity), 0);
	fp_assert_int_eq(arity, 4);
	fp_assert_int_eq(ei_decode_long((char *)body, &index, &tag), 0);
	fp_assert_int_eq(tag, ERL_REG_SEND);
	fp_assert_int_eq(ei_decode_pid((char *)body, &index, &from), 0);
	fp_assert_int_eq(from.num, ei_self(&p.node->ec)->num);
	fp_assert_int_eq(ei_decode_atom((char *)body, &index, atom), 0);
	fp_assert_int_eq(ei_decode_atom((char *)body, &index, atom), 0);
	fp_assert_str_eq(atom, "rex");

	/* {'$gen_call', {Self, Ref}, {call, erlang, whereis, [rex], user}} */
	fp_assert_int_eq(ei_decode_version((char *)body, &index, NULL), 0);
	fp_assert_int_eq(etf_term_check((char *)body, len, (size_t)index), 0);
	fp_assert_int_eq(ei_decode_tuple_header((char *)body, &index, &arity), 0);
	fp_assert_int_eq(arity, 3);
	fp_assert_int_eq(ei_decode_atom((char *)body, &index, atom), 0);
	fp_assert_str_eq(atom, "$gen_call");
	fp_assert_int_eq(ei_decode_tuple_header((char *)body, &index, &arity), 0);
	fp_assert_int_eq(ei_decode_pid((char *)body, &index, &from), 0);
	fp_assert_int_eq(ei_decode_ref((char *)body, &index, &ref), 0);
	fp_assert((ref.n[0] | ((uint64_t)ref.n[1] << 18)) == id);
	fp_assert(ref.n[2] == REF_MAGIC);
	fp_assert_int_eq(ei_decode_tuple_header((char *)body, &index, &arity), 0);
	fp_assert_int_eq(arity, 5);
	fp_assert_int_eq(ei_decode_atom((char *)body, &index, atom), 0);
	fp_assert_str_eq(atom, "call");
	fp_assert_int_eq(ei_decode_atom((char *)body, &index, atom), 0);
	fp_assert_str_eq(atom, "erlang");
	fp_assert_int_eq(ei_decode_atom((char *)body, &index, atom), 0);
	fp_assert_str_eq(atom, "whereis");
	free(body);
	pair_free(&p);
}
END_TEST

/* ---- epmd's names ------------------------------------------------------ */

/* What a fake epmd answers a NAMES request with, and what is read of it. */
static const struct {
	const char *reply;	/* after epmd's 4-byte port */
	size_t big;		/* or this many bytes of 'x' */
	bool short_reply;	/* or only 2 bytes in all */
	int rc;
	const char *names;	/* the names, each followed by ',' */
} names_cases[] = {
	{ "name app at port 40001\nname b_2-c at port 40002\n", 0, false, 0,
	  "app,b_2-c," },
	/* not epmd's form: left out; the last line without its newline kept */
	{ "junk\nname  at port 1\nname x\nname y at port 2", 0, false, 0, "y," },
	{ "", 0, false, 0, "" },
	{ NULL, 0, true, -EPROTO, "" },
	{ NULL, (1u << 20) + 10, false, -EPROTO, "" },
};

static void
add_name(const char *alive, void *data)
{
	char *acc = data;

	strcat(acc, alive);
	strcat(acc, ",");
}

/* A fake epmd on a port of its own: one NAMES request, one reply. */
struct fake_epmd {
	int listen_fd;
	unsigned port;
	pthread_t thread;
	int i;			/* names_cases[i] */
};

static void *
fake_epmd_serve(void *arg)
{
	struct fake_epmd *e = arg;
	unsigned char req[3], port[4] = { 0, 0, 0x11, 0x11 };
	int fd = accept(e->listen_fd, NULL, NULL);

	if (fd < 0)
		return NULL;
	if (read(fd, req, sizeof(req)) == (ssize_t)sizeof(req) && req[2] == 110) {
		if (names_cases[e->i].short_reply) {
			(void)!send(fd, port, 2, MSG_NOSIGNAL);
		} else if (names_cases[e->i].big) {
			size_t left = names_cases[e->i].big;
			char chunk[4096];

			memset(chunk, 'x', sizeof(chunk));
			(void)!send(fd, port, sizeof(port), MSG_NOSIGNAL);
			while (left) {
				size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
				/* the reader stops at its bound and closes: no SIGPIPE */
				ssize_t w = send(fd, chunk, n, MSG_NOSIGNAL);

				if (w <= 0)
					break;
				left -= (size_t)w;
			}
		} else {
			(void)!send(fd, port, sizeof(port), MSG_NOSIGNAL);
			(void)!send(fd, names_cases[e->i].reply,
				    strlen(names_cases[e->i].reply), MSG_NOSIGNAL);
		}
	}
	close(fd);
	return NULL;
}

static void
fake_epmd_start(struct fake_epmd *e, int i)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	char port[16];

	e->i = i;
	e->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fp_assert_int_ge(e->listen_fd, 0);
	fp_assert_int_eq(bind(e->listen_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	fp_assert_int_eq(listen(e->listen_fd, 1), 0);
	fp_assert_int_eq(getsockname(e->listen_fd, (struct sockaddr *)&sin, &len), 0);
	e->port = ntohs(sin.sin_port);
	snprintf(port, sizeof(port), "%u", e->port);
	setenv("ERL_EPMD_PORT", port, 1);
	fp_assert_int_eq(pthread_create(&e->thread, NULL, fake_epmd_serve, e), 0);
}

START_TEST(epmd_names)
{
	struct fake_epmd e;
	char acc[256] = "";

	fake_epmd_start(&e, _i);
	fp_assert_int_eq(fp_epmd_names("127.0.0.1", 2000, add_name, acc),
			 names_cases[_i].rc);
	fp_assert_str_eq(acc, names_cases[_i].names);
	pthread_join(e.thread, NULL);
	close(e.listen_fd);
}
END_TEST

/* No epmd listening: said as such. */
START_TEST(epmd_names_refused)
{
	struct fake_epmd e;
	char acc[256] = "";

	e.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_in sin = { .sin_family = AF_INET,
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(sin);
		char port[16];

		fp_assert_int_eq(bind(e.listen_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
		fp_assert_int_eq(getsockname(e.listen_fd, (struct sockaddr *)&sin, &len), 0);
		snprintf(port, sizeof(port), "%u", ntohs(sin.sin_port));
		setenv("ERL_EPMD_PORT", port, 1);
	}
	/* bound, not listening: the connect is refused */
	fp_assert_int_eq(fp_epmd_names("127.0.0.1", 2000, add_name, acc),
			 -ECONNREFUSED);
	close(e.listen_fd);
	fp_assert_str_eq(acc, "");
}
END_TEST

static Suite *
conn_suite(void)
{
	Suite *s = suite_create("conn");
	TCase *tc;

	tc = tcase_create("receive");
	tcase_add_test(tc, tick_answered);
	tcase_add_loop_test(tc, reply_recognised, 0, 3);
	tcase_add_loop_test(tc, frame_in_pieces, 0, 3);
	tcase_add_test(tc, peer_gone);
	tcase_add_test(tc, nothing_times_out);
	tcase_add_test(tc, wait_gives_up);
	tcase_add_test(tc, path_hears_exits_and_replies);
	suite_add_tcase(s, tc);

	tc = tcase_create("send");
	tcase_add_test(tc, rpc_framed);
	suite_add_tcase(s, tc);

	tc = tcase_create("epmd");
	tcase_add_loop_test(tc, epmd_names, 0,
			    (int)(sizeof(names_cases) / sizeof(names_cases[0])));
	tcase_add_test(tc, epmd_names_refused);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(conn_suite());
}
