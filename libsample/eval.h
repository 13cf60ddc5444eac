/*
 * flame_profd — Erlang source the node runs with its own erl_eval
 * (eval.c): private to libsample.
 *
 * Source the node parses (once per connection) into @parsed, then runs
 * with erl_eval:exprs(Parsed, Bindings) — stock code only. @bindings is
 * an encoded list of {'Var', Value}, or NULL. The reply is
 * {value, Value, Bindings}: node_reply_eval_value() moves a reply (after
 * fp_reply_take_time(), if timed) to Value; node_eval_call() waits and
 * does that. Errors as node_call().
 */
#pragma once

#include <ei.h>
#include <stdbool.h>
#include <stdint.h>

#include "fp/node.h"

/* Have the node parse @source (erl_scan, erl_parse) into @parsed: 0 or
 * a negative errno as node_call(). */
int
node_expr_parse(struct fp_node *node, const char *source, ei_x_buff *parsed,
		unsigned timeout_ms);

/* Send erl_eval:exprs(@parsed, @bindings) without waiting; the request
 * id goes to @id. @timed: wrapped in timer:tc. 0 or a negative errno. */
int
node_eval_send(struct fp_node *node, const ei_x_buff *parsed,
	       const ei_x_buff *bindings, bool timed, uint64_t *id);

/* node_eval_send() and wait up to @timeout_ms for the reply, moved to
 * Value. 0 or a negative errno as node_call(). */
int
node_eval_call(struct fp_node *node, const ei_x_buff *parsed,
	       const ei_x_buff *bindings, unsigned timeout_ms,
	       struct fp_reply *reply);

/* Move @reply from {value, Value, Bindings} to Value: 0, or -EBADMSG
 * for another shape (a badrpc included). */
int
node_reply_eval_value(struct fp_reply *reply);
