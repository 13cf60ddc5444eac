/*
 * flame_profd — the eval request path (--request eval).
 *
 * Each sampling process is a fun that the node's own erl_eval interprets:
 * no module is loaded. It links itself to this C node, so it dies with
 * the connection, and answers
 * {flame_profd_sample, From, Ref, Pids, ItemLists} with the same
 * {Ref, {Micros, Result}} a timed rex call answers, from a process whose
 * heap stays grown between batches (rex spawns a fresh worker per call,
 * and the worker's heap grows from 233 words, garbage collecting as the
 * reply is built). Every collection is a full sweep: a batch is garbage
 * once sent, so nothing is worth an old generation, which would otherwise
 * hold megabytes for good.
 */
#include <errno.h>
#include <string.h>

#include <ei.h>

#include "conn.h"
#include "eval.h"
#include "fp/log.h"
#include "node-private.h"
#include "path.h"
#include "request.h"

/* The node scans and parses the source itself (erl_scan:string/1,
 * erl_parse:parse_exprs/1): we only pass its terms back. */
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

	/* nothing more goes onto a stream cut mid-message */
	if (node->broken) {
		node->nsamplers = 0;
		return;
	}
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

/* A sampler is linked to us: if one dies, start over (a new connection
 * starts new ones) rather than send every third batch into the void. */
static bool
eval_exited(struct fp_node *node, const erlang_pid *from)
{
	for (unsigned k = 0; k < node->nsamplers; k++) {
		if (node_same_pid(from, &node->samplers[k])) {
			fp_log(FP_LOG_WARNING,
			       "%s: eval sampler <%u.%u> exited; reconnecting",
			       node->target, from->num, from->serial);
			return true;
		}
	}
	return false;
}

static void
eval_replied(struct fp_node *node, uint64_t id)
{
	for (unsigned k = 0; k < node->nsamplers; k++) {
		if (node->sampler_busy[k] == id)
			node->sampler_busy[k] = 0;
	}
}

/* {flame_profd_sample, Self, Ref, Pids, ItemLists} to a sampling process */
static int
eval_sample_send(struct fp_node *node, const struct fp_pid *pids,
		 const enum fp_ask *asks, size_t n, uint64_t *id)
{
	ei_x_buff *x = &node->tx;
	unsigned k = node->next_sampler;
	erlang_pid *to;

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
	node_encode_sample_pids(node, x, pids, asks, n);
	node_encode_sample_items(node, x, asks, n);
	node->sampler_busy[k] = *id;
	return node_send(node, to, x);
}

const struct node_path node_path_eval = {
	.start = start_eval_samplers,
	.stop = stop_eval_samplers,
	.exited = eval_exited,
	.replied = eval_replied,
	.sample = eval_sample_send,
};
