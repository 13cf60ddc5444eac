/*
 * flame_profd — expressions the node runs with its own erl_eval.
 *
 * Some requests compose stock calls on the node (a bounded window of the
 * process table, a process that watches the connection): rex runs one
 * function, so these are Erlang source that the node scans and parses
 * itself (erl_scan:string/1, erl_parse:parse_exprs/1) once per connection,
 * and erl_eval:exprs/2 interprets on every call. Nothing is loaded: the
 * only code that runs is OTP's.
 */
#include <errno.h>
#include <string.h>

#include "conn.h"
#include "etf.h"
#include "eval.h"
#include "node-private.h"

int
node_expr_parse(struct fp_node *node, const char *source, ei_x_buff *parsed,
		unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff args;
	int rc, start, end;

	ei_x_new(&args);
	/* erl_scan:string(Source) -> {ok, Tokens, End} */
	ei_x_encode_list_header(&args, 1);
	ei_x_encode_string(&args, source);
	ei_x_encode_empty_list(&args);
	rc = node_call(node, "erl_scan", "string", &args, timeout_ms, &reply);
	if (rc < 0 || (rc = etf_reply_element(&reply, "ok", &start, &end)) < 0)
		goto out;

	/* erl_parse:parse_exprs(Tokens) -> {ok, Exprs} */
	args.index = 0;
	ei_x_encode_list_header(&args, 1);
	ei_x_append_buf(&args, reply.buf + start, end - start);
	ei_x_encode_empty_list(&args);
	rc = node_call(node, "erl_parse", "parse_exprs", &args, timeout_ms, &reply);
	if (rc < 0 || (rc = etf_reply_element(&reply, "ok", &start, &end)) < 0)
		goto out;
	parsed->index = 0;
	ei_x_append_buf(parsed, reply.buf + start, end - start);
out:
	ei_x_free(&args);
	return rc;
}

/* [Exprs, Bindings] */
static void
encode_eval_args(ei_x_buff *x, const ei_x_buff *parsed,
		 const ei_x_buff *bindings)
{
	ei_x_encode_list_header(x, 2);
	ei_x_append_buf(x, parsed->buff, parsed->index);
	if (bindings)
		ei_x_append_buf(x, bindings->buff, bindings->index);
	else
		ei_x_encode_empty_list(x);
	ei_x_encode_empty_list(x);
}

int
node_eval_send(struct fp_node *node, const ei_x_buff *parsed,
	       const ei_x_buff *bindings, bool timed, uint64_t *id)
{
	ei_x_buff args;
	int rc;

	ei_x_new(&args);
	encode_eval_args(&args, parsed, bindings);
	rc = timed ? node_rpc_send_timed(node, "erl_eval", "exprs", &args, id, false) :
		     node_rpc_send(node, "erl_eval", "exprs", &args, id);
	ei_x_free(&args);
	return rc;
}

int
node_eval_call(struct fp_node *node, const ei_x_buff *parsed,
	       const ei_x_buff *bindings, unsigned timeout_ms,
	       struct fp_reply *reply)
{
	ei_x_buff args;
	int rc;

	ei_x_new(&args);
	encode_eval_args(&args, parsed, bindings);
	rc = node_call(node, "erl_eval", "exprs", &args, timeout_ms, reply);
	ei_x_free(&args);
	if (rc == 0)
		rc = node_reply_eval_value(reply);
	return rc;
}

int
node_reply_eval_value(struct fp_reply *reply)
{
	int start, end;

	if (reply->badrpc || etf_reply_check(reply) < 0 ||
	    etf_reply_element(reply, "value", &start, &end) < 0)
		return -EPROTO;
	reply->index = start;
	return 0;
}
