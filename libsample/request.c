/*
 * flame_profd — the requests: their item lists, pids and rpc calls.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <ei.h>

#include "conn.h"
#include "etf.h"
#include "node-private.h"
#include "path.h"
#include "request.h"

#define ITEM(id, name) [NODE_ITEM_##id] = { name, sizeof(name) - 1 },
const struct node_item_name node_item_names[NODE_NITEMS] = {
	NODE_ITEMS(ITEM)
};
#undef ITEM

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
 * The first list also reads message_queue_len and reductions, which
 * need no signal either: a process that answers it itself (it was
 * running, or a message or signal was on its way to it) answers at a
 * signal-handling point, after taking the messages sent before the
 * request, and reads `running` whether or not it was on a scheduler when
 * asked. Messages in its queue, and next to no work done before it
 * answers the second list, say a message woke it and it ran only to
 * take it (a gen:call client whose reply arrived, waiting in a run
 * queue): the decoder writes such a sample `runnable`, which is what
 * the process's state said before the request (status_before_asked()
 * in sample.c).
 *
 * A probed process is asked once, for items that need no signal: a
 * process that is not running answers without being scheduled, and its
 * reductions do not move (each signal it handles costs it one).
 */
static const enum node_item instant_items[] = {
	NODE_ITEM_STATUS,
	NODE_ITEM_REGISTERED_NAME,
	NODE_ITEM_MESSAGE_QUEUE_LEN,
	NODE_ITEM_REDUCTIONS,
};

static const enum node_item signalled_items[] = {
	NODE_ITEM_CURRENT_STACKTRACE,
	NODE_ITEM_REDUCTIONS,
	NODE_ITEM_MEMORY,
	NODE_ITEM_MESSAGE_QUEUE_LEN,
	NODE_ITEM_TOTAL_HEAP_SIZE,
	NODE_ITEM_HEAP_SIZE,
	NODE_ITEM_STACK_SIZE,
	NODE_ITEM_GARBAGE_COLLECTION,
	NODE_ITEM_GARBAGE_COLLECTION_INFO,
};

static const enum node_item probe_items[] = {
	NODE_ITEM_STATUS,
	NODE_ITEM_REGISTERED_NAME,
	NODE_ITEM_REDUCTIONS,
	NODE_ITEM_MESSAGE_QUEUE_LEN,
	NODE_ITEM_HEAP_SIZE,
	NODE_ITEM_STACK_SIZE,
	NODE_ITEM_GARBAGE_COLLECTION,
};

#define NITEMS(a) (sizeof(a) / sizeof((a)[0]))

static void
encode_item(ei_x_buff *x, enum node_item item)
{
	ei_x_encode_atom_len(x, node_item_names[item].name,
			     (int)node_item_names[item].len);
}

/* The bytes @n items take, as encode_item() writes them. */
static size_t
items_bytes(const enum node_item *items, size_t n)
{
	size_t bytes = 0;

	for (size_t k = 0; k < n; k++)
		bytes += 3 + node_item_names[items[k]].len;
	return bytes;
}

static void
encode_items(ei_x_buff *x, const enum node_item *items, size_t n, bool ic)
{
	size_t bytes = 6 + items_bytes(items, n) +
		       (ic ? 3 + node_item_names[NODE_ITEM_INITIAL_CALL].len : 0);

	/* one of a request's item lists: reserved one list at a time,
	 * the buffer still grows geometrically over the request */
	node_x_reserve(x, bytes);
	ei_x_encode_list_header(x, (long)(n + ic));
	for (size_t k = 0; k < n; k++)
		encode_item(x, items[k]);
	if (ic)
		encode_item(x, NODE_ITEM_INITIAL_CALL);
	ei_x_encode_empty_list(x);
}

static void
encode_signalled(const struct fp_node *node, ei_x_buff *x)
{
	size_t n = NITEMS(signalled_items);

	if (!node->nextra_items) {
		encode_items(x, signalled_items, n, false);
		return;
	}
	node_x_reserve(x, 6 + (size_t)node->extra_items.index +
			  items_bytes(signalled_items, n));
	ei_x_encode_list_header(x, (long)n + node->nextra_items);
	for (size_t k = 0; k < n; k++)
		encode_item(x, signalled_items[k]);
	ei_x_append_buf(x, node->extra_items.buff, node->extra_items.index);
	ei_x_encode_empty_list(x);
}

void
node_encode_item_sets(const struct fp_node *node, ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 3);
	encode_items(x, instant_items, NITEMS(instant_items), false);
	encode_signalled(node, x);
	encode_items(x, probe_items, NITEMS(probe_items), false);
}

void
node_encode_dict_key(ei_x_buff *x, const char *key)
{
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "dictionary");
	ei_x_encode_atom(x, key);
}

/*
 * They read the process dictionary, which only the process itself may
 * read: process_info answers them through a signal (measured: each costs
 * a waiting process a reduction, as current_stacktrace does), so they
 * ride in the list that already sends one, never in the instant list, and
 * probes do without them.
 */
void
node_encode_extra_items(struct fp_node *node)
{
	ei_x_buff *x = &node->extra_items;
	bool keys = node->dict_keys;

	x->index = 0;
	node->nextra_items = 0;
	if (node->label_source == FP_LABEL_ITEM) {
		encode_item(x, NODE_ITEM_LABEL);
		node->nextra_items++;
	} else if (node->label_source == FP_LABEL_DICT) {
		node_encode_dict_key(x, NODE_KEY_LABEL);
		node->nextra_items++;
	}
	for (size_t i = 0; keys && i < node->nkeys; i++) {
		node_encode_dict_key(x, node->keys[i]);
		node->nextra_items++;
	}
	if (keys && node->nlogger_keys) {
		node_encode_dict_key(x, NODE_KEY_LOGGER);
		node->nextra_items++;
	}
	if (keys && node->callers) {
		node_encode_dict_key(x, NODE_KEY_CALLERS);
		node->nextra_items++;
	}
}

void
node_encode_local_pid(struct fp_node *node, ei_x_buff *x, struct fp_pid pid)
{
	erlang_pid p;

	memset(&p, 0, sizeof(p));
	snprintf(p.node, sizeof(p.node), "%s", node_name_of(node));
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
void
node_encode_sample_pids(struct fp_node *node, ei_x_buff *x, const struct fp_pid *pids,
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

void
node_encode_sample_items(const struct fp_node *node, ei_x_buff *x,
		  const enum fp_ask *asks, size_t n)
{
	size_t lists = fp_node_sample_lists(asks, n);

	if (lists) {
		ei_x_encode_list_header(x, (long)lists);
		for (size_t i = 0; i < n; i++) {
			enum fp_ask ask = ask_of(asks, i);

			if (ask == FP_ASK_PROBE) {
				encode_items(x, probe_items, NITEMS(probe_items), false);
				continue;
			}
			encode_items(x, instant_items, NITEMS(instant_items),
				     ask == FP_ASK_FULL_IC);
			encode_signalled(node, x);
		}
	}
	ei_x_encode_empty_list(x);
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
fp_node_decode_whereis(const struct fp_reply *reply, struct fp_pid *out,
		       bool *found, size_t n)
{
	const char *buf = reply->buf;
	int index = reply->index, count, type, size;

	if (reply->badrpc || etf_reply_check(reply) < 0 ||
	    ei_decode_list_header(buf, &index, &count) < 0 || count < 0 ||
	    (size_t)count != n)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		if (ei_get_type(buf, &index, &type, &size) < 0)
			return -EBADMSG;
		found[i] = type == ERL_PID_EXT || type == ERL_NEW_PID_EXT;
		if (found[i] ? etf_decode_pid(buf, &index, &out[i]) < 0 :
			       etf_skip_term(buf, &index) < 0)
			return -EBADMSG;
	}
	return 0;
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

	if (reply->badrpc || etf_reply_check(reply) < 0 ||
	    ei_decode_list_header(buf, &index, &count) < 0 || (size_t)count != n)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		if (etf_decode_atom(buf, &index, atom) < 0)
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
				node_encode_dict_key(&args, NODE_KEY_INITIAL_CALL);
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

int
node_rex_sample(struct fp_node *node, const struct fp_pid *pids,
		const enum fp_ask *asks, size_t n, uint64_t *id)
{
	ei_x_buff args;
	int rc;

	ei_x_new(&args);
	ei_x_encode_list_header(&args, 3);
	encode_export_fun(&args, "erlang", "process_info", 2);
	node_encode_sample_pids(node, &args, pids, asks, n);
	node_encode_sample_items(node, &args, asks, n);
	ei_x_encode_empty_list(&args);
	rc = node_rpc_send_timed(node, "lists", "zipwith", &args, id, true);
	ei_x_free(&args);
	return rc;
}

int
fp_node_sample_request(struct fp_node *node, const struct fp_pid *pids,
		       const enum fp_ask *asks, size_t n, uint64_t *id)
{
	if (node->fd < 0 || !node->ops)
		return -ENOTCONN;
	return node->ops->sample(node, pids, asks, n, id);
}

/* The stock path: every sample an rpc, nothing started on the node. */
const struct node_path node_path_rex = {
	.sample = node_rex_sample,
};
