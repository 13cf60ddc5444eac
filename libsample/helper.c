/*
 * flame_profd — the opt-in helper (FP_REQUEST_HELPER, --request helper).
 *
 * At connect the node loads flame_profd_helper.erl (compiled at build
 * time, carried as bytes) under a name of this connection's own, and one
 * process of it starts, linked to us. It samples the set we send it on
 * the node's timer and sends batches of rows; see the module for the
 * protocol. It deletes and purges its module when we say stop or the
 * connection goes: nothing stays on the node.
 *
 * The name is the module's with the same length, fpdh_ and 13 hex digits
 * of our OS pid and this connection's creation: two daemons, or two
 * connections of one, never share a module, so neither can purge the
 * other's code from under it.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ei.h>

#include "conn.h"
#include "etf.h"
#include "fp/log.h"
#include "node-private.h"
#include "path.h"
#include "request.h"
#include "util-mem.h"

#define HELPER_MODULE "flame_profd_helper"
#define HELPER_TICK_MS 20	/* a heat-map row, as the daemon's tick */
#define HELPER_FLUSH_MS 250	/* how often it sends what it took */

int
node_beam_rename(unsigned char *beam, size_t len, const char *from,
		 const char *to)
{
	size_t flen = strlen(from), pos = 12;

	if (strlen(to) != flen || len < 12 || memcmp(beam, "FOR1", 4) != 0 ||
	    memcmp(beam + 8, "BEAM", 4) != 0)
		return -EINVAL;
	while (pos + 8 <= len) {
		uint32_t size = etf_be32(beam + pos + 4);
		unsigned char *data = beam + pos + 8;
		size_t at, n;

		if (size > len - pos - 8)
			return -EINVAL;
		if (memcmp(beam + pos, "AtU8", 4) != 0) {
			pos += 8 + (((size_t)size + 3) & ~(size_t)3);
			continue;
		}
		/* count, then the first atom, the module: its length is a
		 * byte (OTP < 26, count > 0) or a compact-term integer
		 * (count < 0) */
		if (size < 5)
			return -EINVAL;
		if ((int32_t)etf_be32(data) > 0) {
			n = data[4];
			at = 5;
		} else if ((data[4] & 0x08) == 0) {
			n = data[4] >> 4;
			at = 5;
		} else if ((data[4] & 0x10) == 0 && size >= 6) {
			n = ((size_t)(data[4] & 0xe0) << 3) | data[5];
			at = 6;
		} else {
			return -EINVAL;
		}
		if (n != flen || at + n > size || memcmp(data + at, from, n) != 0)
			return -EINVAL;
		memcpy(data + at, to, n);
		return 0;
	}
	return -EINVAL;
}

static void
helper_unload(struct fp_node *node, unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff args;

	ei_x_new(&args);
	ei_x_encode_list_header(&args, 1);
	ei_x_encode_atom(&args, node->helper_mod);
	ei_x_encode_empty_list(&args);
	if (node_call(node, "code", "delete", &args, timeout_ms, &reply) < 0 ||
	    node_call(node, "code", "purge", &args, timeout_ms, &reply) < 0)
		fp_log(FP_LOG_WARNING, "%s: could not unload the helper module %s",
		       node->target, node->helper_mod);
	node->helper_loaded = false;
	ei_x_free(&args);
}

static void
log_reply(const char *target, const char *what, const struct fp_reply *reply)
{
	char *s = etf_term_text(reply->buf, reply->index, 300);

	fp_log(FP_LOG_WARNING, "%s: %s: %s", target, what, s);
	free(s);
}

/* 0, -ENOEXEC when the node would not load the module, or as node_call() */
static int
helper_start(struct fp_node *node, unsigned timeout_ms)
{
	unsigned char *beam = xzalloc(fp_helper_beam_len);
	uint64_t tag = ((uint64_t)(getpid() & 0x3fffff) << 30) |
		       (node->ec.creation & 0x3fffffff);
	char file[320], atom[MAXATOMLEN_UTF8];
	struct fp_reply reply;
	ei_x_buff args;
	int rc, i, arity;

	/* the state is clear: new, or helper_stop() at the disconnect
	 * every connect starts with */
	ei_x_new(&args);
	snprintf(node->helper_mod, sizeof(node->helper_mod), "fpdh_%013llx",
		 (unsigned long long)tag);
	memcpy(beam, fp_helper_beam, fp_helper_beam_len);
	rc = node_beam_rename(beam, fp_helper_beam_len, HELPER_MODULE,
			      node->helper_mod);
	if (rc < 0) {
		fp_log(FP_LOG_ERROR, "the helper module carried is no BEAM file");
		goto out;
	}

	/* code:load_binary(Mod, File, Bin) -> {module, Mod} */
	snprintf(file, sizeof(file), "flame_profd %s helper (%s)", FP_VERSION,
		 node->self_name);
	ei_x_encode_list_header(&args, 3);
	ei_x_encode_atom(&args, node->helper_mod);
	ei_x_encode_string(&args, file);
	ei_x_encode_binary(&args, beam, (long)fp_helper_beam_len);
	ei_x_encode_empty_list(&args);
	rc = node_call(node, "code", "load_binary", &args, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_decode_tuple_header(reply.buf, &i, &arity) < 0 || arity != 2 ||
	    etf_decode_atom(reply.buf, &i, atom) < 0 ||
	    strcmp(atom, "module") != 0) {
		log_reply(node->target, "code:load_binary/3 of the helper module "
			  "answered", &reply);
		rc = -ENOEXEC;
		goto out;
	}
	node->helper_loaded = true;

	/* erlang:spawn(Mod, init, [Self, Ref, Items, Tick, Flush]) -> Pid */
	node->helper_id = ++node->next_id;
	args.index = 0;
	ei_x_encode_list_header(&args, 3);
	ei_x_encode_atom(&args, node->helper_mod);
	ei_x_encode_atom(&args, "init");
	ei_x_encode_list_header(&args, 5);
	ei_x_encode_pid(&args, ei_self(&node->ec));
	node_encode_ref(node, &args, node->helper_id, false);
	node_encode_item_sets(node, &args);
	ei_x_encode_long(&args, HELPER_TICK_MS);
	ei_x_encode_long(&args, HELPER_FLUSH_MS);
	ei_x_encode_empty_list(&args);
	ei_x_encode_empty_list(&args);
	rc = node_call(node, "erlang", "spawn", &args, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_decode_pid(reply.buf, &i, &node->helper) < 0) {
		rc = -EPROTO;
		goto out;
	}
	node->have_helper = true;
	fp_log(FP_LOG_INFO, "%s: helper module %s loaded, sampling process <0.%u.%u>",
	       node->target, node->helper_mod, node->helper.num,
	       node->helper.serial);
	rc = 0;
out:
	if (rc < 0) {
		if (rc != -ENOEXEC)
			fp_log(FP_LOG_WARNING, "%s: could not start the helper: %s",
			       node->target, rc == -EPROTO ? "unexpected reply" :
			       strerror(-rc));
		node->helper_id = 0;
		if (node->helper_loaded && node->fd >= 0)
			helper_unload(node, timeout_ms);
		/* a module built by a newer erlc than the node's: the stock
		 * path needs none (the connect falls back to it) */
		if (rc == -ENOEXEC)
			fp_log(FP_LOG_WARNING, "%s (OTP %s) would not load the helper module; sampling through rex, which needs no module",
			       node->target, node->otp_release);
	}
	free(beam);
	ei_x_free(&args);
	return rc;
}

static int
helper_send(struct fp_node *node, const ei_x_buff *x)
{
	if (node->fd < 0 || !node->have_helper)
		return -ENOTCONN;
	return node_send(node, &node->helper, x);
}

/*
 * At disconnect. A helper still running is asked to stop, best effort:
 * the link ends it anyway when we go, and it unloads its module itself.
 * One that was killed on the node could not: its module is unloaded here,
 * over the connection still open.
 */
static void
helper_stop(struct fp_node *node)
{
	/* not onto a stream cut mid-message (fp_node_disconnect()) */
	if (node->helper_exited && node->helper_loaded && !node->broken)
		helper_unload(node, 2000);
	if (node->have_helper && !node->helper_stopping && !node->broken &&
	    node->fd >= 0) {
		ei_x_buff x;

		ei_x_new_with_version(&x);
		ei_x_encode_atom(&x, "flame_profd_stop");
		ei_send_tmo(node->fd, &node->helper, x.buff, x.index, 200);
		ei_x_free(&x);
	}
	node->have_helper = node->helper_stopping = false;
	node->helper_loaded = node->helper_exited = false;
	node->helper_id = 0;
	node->helper_mod[0] = '\0';
}

/* True (and logs why) when an exit signal came from the helper. */
static bool
helper_exited(struct fp_node *node, const erlang_pid *from)
{
	if (!node->have_helper || !node_same_pid(from, &node->helper))
		return false;
	node->have_helper = false;
	if (node->helper_stopping)
		return false;	/* asked to stop: its last batch came first */
	node->helper_exited = true;
	fp_log(FP_LOG_WARNING, "%s: the helper process exited; reconnecting",
	       node->target);
	return true;
}

/* Samples outside the helper's own (fp_node_sample_request()) go
 * through rex. */
const struct node_path node_path_helper = {
	.start = helper_start,
	.stop = helper_stop,
	.exited = helper_exited,
	.sample = node_rex_sample,
};

uint64_t
fp_node_helper_id(const struct fp_node *node)
{
	return node->helper_id;
}

bool
fp_node_helper_pid(const struct fp_node *node, struct fp_pid *pid)
{
	if (!node->have_helper)
		return false;
	pid->num = node->helper.num;
	pid->serial = node->helper.serial;
	return true;
}

const char *
fp_node_helper_module(const struct fp_node *node)
{
	return node->helper_id ? node->helper_mod : "";
}

/* {Tag, ...} of @arity elements, in the node's send buffer */
static ei_x_buff *
message(struct fp_node *node, const char *tag, int arity)
{
	ei_x_buff *x = &node->tx;

	x->index = 0;
	ei_x_encode_version(x);
	if (arity > 1)
		ei_x_encode_tuple_header(x, arity);
	ei_x_encode_atom(x, tag);
	return x;
}

int
fp_node_helper_config(struct fp_node *node, const struct fp_pid *pids,
		      size_t n, double rate, bool idle_reuse, bool paused)
{
	ei_x_buff *x = message(node, "flame_profd_config", 5);

	node_encode_pid_list(node, x, pids, n);
	ei_x_encode_double(x, rate);
	ei_x_encode_boolean(x, idle_reuse);
	ei_x_encode_boolean(x, paused);
	return helper_send(node, x);
}

int
fp_node_helper_forget(struct fp_node *node, const struct fp_pid *pids,
		      size_t n)
{
	ei_x_buff *x = message(node, "flame_profd_forget", 2);

	node_encode_pid_list(node, x, pids, n);
	return helper_send(node, x);
}

int
fp_node_helper_stop(struct fp_node *node)
{
	int rc;

	rc = helper_send(node, message(node, "flame_profd_stop", 1));
	if (rc == 0)
		node->helper_stopping = true;
	return rc;
}

static int
decode_u64(const char *buf, int *index, uint64_t *v)
{
	int64_t s;

	if (etf_decode_int(buf, index, &s) < 0 || s < 0)
		return -EBADMSG;
	*v = (uint64_t)s;
	return 0;
}

/* A binary's bytes, in place. */
static int
binary_at(const char *buf, int *index, const char **data, size_t *len)
{
	int type, size;

	if (ei_get_type(buf, index, &type, &size) < 0 || type != ERL_BINARY_EXT)
		return -EBADMSG;
	*data = buf + *index + 5;
	*len = (size_t)size;
	*index += 5 + size;
	return 0;
}

int
fp_node_batch_open(const struct fp_reply *reply, struct fp_batch *b)
{
	char atom[MAXATOMLEN_UTF8];
	int index = reply->index, arity, count, boolean;

	memset(b, 0, sizeof(*b));
	if (reply->badrpc || etf_reply_check(reply) < 0 ||
	    ei_decode_tuple_header(reply->buf, &index, &arity) < 0 || arity < 1 ||
	    etf_decode_atom(reply->buf, &index, atom) < 0)
		return -EBADMSG;
	if (strcmp(atom, "flame_profd_error") == 0 && arity == 2) {
		struct fp_reply why = *reply;

		why.index = index;
		log_reply("flame_profd", "the helper failed on the node", &why);
		return -EPROTO;
	}
	if (strcmp(atom, "flame_profd_batch") != 0 || arity != 6 ||
	    decode_u64(reply->buf, &index, &b->sent_us) < 0 ||
	    decode_u64(reply->buf, &index, &b->work_us) < 0 ||
	    decode_u64(reply->buf, &index, &b->skipped) < 0 ||
	    ei_decode_boolean(reply->buf, &index, &boolean) < 0 ||
	    ei_decode_list_header(reply->buf, &index, &count) < 0)
		return -EBADMSG;
	b->last = boolean != 0;
	b->rows = (size_t)count;
	b->buf = reply->buf;
	b->len = reply->len;
	b->index = index;
	return 0;
}

int
fp_node_batch_row(struct fp_batch *b, struct fp_batch_row *row,
		  struct fp_pid *pids, enum fp_ask *asks, size_t max)
{
	const char *data, *ask;
	size_t len, nasks;
	int index, arity, count;

	if (b->next >= b->rows)
		return 0;
	if (binary_at(b->buf, &b->index, &data, &len) < 0)
		return -EBADMSG;
	b->next++;

	/* term_to_binary({TimeUs, Pids, Asks, Results}), unchecked so far */
	if (len < 1 || (unsigned char)data[0] != 131 ||
	    etf_term_check(data, len, 1) < 0)
		return -EBADMSG;
	index = 1;
	if (ei_decode_tuple_header(data, &index, &arity) < 0 || arity != 4 ||
	    decode_u64(data, &index, &row->time_us) < 0 ||
	    ei_decode_list_header(data, &index, &count) < 0 ||
	    (size_t)count > max)
		return -EBADMSG;
	for (int i = 0; i < count; i++) {
		if (etf_decode_pid(data, &index, &pids[i]) < 0)
			return -EBADMSG;
	}
	if (count > 0 && ei_decode_list_header(data, &index, &arity) < 0)
		return -EBADMSG;	/* the tail */
	if (binary_at(data, &index, &ask, &nasks) < 0 || nasks != (size_t)count)
		return -EBADMSG;
	for (int i = 0; i < count; i++) {
		if (ask[i] != FP_ASK_FULL && ask[i] != FP_ASK_FULL_IC &&
		    ask[i] != FP_ASK_PROBE)
			return -EBADMSG;
		asks[i] = (enum fp_ask)ask[i];
	}
	row->n = (size_t)count;
	row->results = (struct fp_reply){
		.buf = data,
		.len = len,
		.index = index,
		.checked = true,
	};
	return 1;
}
