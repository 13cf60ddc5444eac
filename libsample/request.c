/*
 * flame_profd — the requests: their item lists, pids and rpc calls.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <ei.h>

#include "conn.h"
#include "etf.h"
#include "eval.h"
#include "node-private.h"
#include "path.h"
#include "request.h"
#include "util-mem.h"

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
 * the process's state said before the request, and so it does for a
 * process that keeps a scheduler busy for too little of the time to
 * have likely been on one (status_before_asked() in sample.c).
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
fp_node_peers_request(struct fp_node *node, uint64_t *id)
{
	ei_x_buff args;
	int rc;

	ei_x_new(&args);
	ei_x_encode_empty_list(&args);
	rc = node_rpc_send_timed(node, "erlang", "nodes", &args, id, false);
	ei_x_free(&args);
	return rc;
}

int
fp_node_decode_peers(const struct fp_reply *reply,
		     void (*each)(const char *name, void *data), void *data)
{
	const char *buf = reply->buf;
	int index = reply->index, count, type, size;
	char atom[MAXATOMLEN_UTF8];

	if (reply->badrpc || etf_reply_check(reply) < 0 ||
	    ei_get_type(buf, &index, &type, &size) < 0)
		return -EBADMSG;
	if (type == ERL_NIL_EXT)
		return 0;
	/* every element is checked before any is handed out: a reply that
	 * is not wholly a list of atoms says nothing of the cluster */
	if (ei_decode_list_header(buf, &index, &count) < 0 || count < 0)
		return -EBADMSG;
	for (int i = 0; i < count; i++) {
		if (etf_decode_atom(buf, &index, atom) < 0)
			return -EBADMSG;
	}
	if (ei_get_type(buf, &index, &type, &size) < 0 || type != ERL_NIL_EXT)
		return -EBADMSG;
	index = reply->index;
	ei_decode_list_header(buf, &index, &count);
	for (int i = 0; i < count; i++) {
		etf_decode_atom(buf, &index, atom);
		each(atom, data);
	}
	return count;
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

/*
 * What each pid was started as, per proc_lib: the raw '$initial_call',
 * handed back only when it is {Module, Function, Arity} with an arity a
 * function can have, else the atom odd (undefined where there is none).
 * Never proc_lib:initial_call/1: it makes an atom per argument
 * ('Argument__N', make_dummy_args/2) of whatever arity the process set,
 * and {M, F, -1} or an arity past the atom table's room fills the table,
 * which aborts the VM. The check runs on the node, so that the reply's
 * size never depends on what an application put there (a big binary in
 * place of the module would otherwise travel whole). Item is
 * {dictionary, '$initial_call'} where the node reads one key alone, else
 * dictionary: the whole dictionary copied, as proc_lib:initial_call/1
 * copies it (the caller keeps that to small processes), and the key
 * found in it with lists:keyfind/3.
 *
 * The per-pid work is stock compiled code (lists:zipwith/3,
 * lists:zipwith3/4, match specifications run by ets:match_spec_run/2);
 * erl_eval only glues it, inside a fun so that the copies stay out of
 * the bindings the reply carries. An interpreted fun per pid costs 4 to
 * 6 us a pid, this 1.3 to 1.7 at 108 pids, of which some 80 us are the
 * glue's whatever the count (bench/initial-calls.escript, OTP 25 and 27).
 */
static const char initial_calls_source[] =
	"(fun() ->"
	" N = length(Pids),"
	" R = lists:zipwith(fun erlang:process_info/2, Pids, lists:duplicate(N, Item)),"
	" Ks = case Item of"
	"   dictionary ->"
	"     Ds = ets:match_spec_run(R, ets:match_spec_compile("
	"            [{{dictionary, '$1'}, [], ['$1']}, {'_', [], [[]]}])),"
	"     lists:zipwith3(fun lists:keyfind/3, lists:duplicate(N, '$initial_call'),"
	"                    lists:duplicate(N, 1), Ds);"
	"   _ -> R"
	" end,"
	" ets:match_spec_run(Ks, ets:match_spec_compile(["
	"   {{'_', {'$1', '$2', '$3'}},"
	"    [{is_atom, '$1'}, {is_atom, '$2'}, {is_integer, '$3'},"
	"     {'>=', '$3', 0}, {'=<', '$3', 255}],"
	"    [{{'$1', '$2', '$3'}}]},"
	"   {'_', [{'orelse', {'==', '$_', false}, {'==', '$_', undefined}}],"
	"    [undefined]},"
	"   {{'_', undefined}, [], [undefined]},"
	"   {'_', [], [odd]}]))"
	" end)().";

int
node_initial_calls_prepare(struct fp_node *node, unsigned timeout_ms)
{
	ei_x_buff parsed;
	int rc;

	ei_x_new(&parsed);
	rc = node_expr_parse(node, initial_calls_source, &parsed, timeout_ms);
	if (rc == 0) {
		node->ic_exprs = xrealloc(node->ic_exprs, (size_t)parsed.index);
		memcpy(node->ic_exprs, parsed.buff, (size_t)parsed.index);
		node->ic_len = (size_t)parsed.index;
	}
	ei_x_free(&parsed);
	return rc;
}

int
fp_node_initial_call_request(struct fp_node *node, const struct fp_pid *pids,
			     size_t n, uint64_t *id)
{
	ei_x_buff bindings, parsed = { 0 };
	int rc;

	if (node->fd < 0 || !node->ic_exprs)
		return -ENOTCONN;
	/* [{'Item', _}, {'Pids', _}]: erl_eval's bindings are an orddict */
	ei_x_new(&bindings);
	ei_x_encode_list_header(&bindings, 2);
	ei_x_encode_tuple_header(&bindings, 2);
	ei_x_encode_atom(&bindings, "Item");
	if (node->dict_keys)
		node_encode_dict_key(&bindings, NODE_KEY_INITIAL_CALL);
	else
		ei_x_encode_atom(&bindings, "dictionary");
	ei_x_encode_tuple_header(&bindings, 2);
	ei_x_encode_atom(&bindings, "Pids");
	node_encode_pid_list(node, &bindings, pids, n);
	ei_x_encode_empty_list(&bindings);
	/* node_eval_send() reads the parse tree only */
	parsed.buff = node->ic_exprs;
	parsed.index = (int)node->ic_len;
	rc = node_eval_send(node, &parsed, &bindings, true, id);
	ei_x_free(&bindings);
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
