/*
 * flame_profd — the processes a user names with --pid, checked by the
 * node itself.
 *
 * What a node accepts as a local pid differs between releases (OTP 25
 * takes numbers below 2^15 and serials below 2^13, OTP 27 numbers below
 * 2^28), and a pid it does not accept, sent in a distribution message,
 * makes it drop the connection as corrupt. So a pid a user typed is
 * never encoded by us: the node turns its text into a pid
 * (erlang:list_to_pid/1, which refuses what it would not accept) and we
 * keep the pid it sends back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "etf.h"
#include "eval.h"
#include "node-private.h"

/* Bindings: Strs, ["<0.N.S>", ...]. Value: a list of {Pid, Alive} or
 * invalid, one per string. */
static const char check_source[] =
	"(fun() -> "
	"  [case catch erlang:list_to_pid(S) of "
	"     P when is_pid(P), node(P) =:= node() -> {P, erlang:is_process_alive(P)}; "
	"     _ -> invalid "
	"   end || S <- Strs] "
	"end)().";

int
fp_node_check_pids(struct fp_node *node, const char *const *texts, size_t n,
		   struct fp_pid *pids, enum fp_pid_state *states,
		   unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff bindings, exprs;
	size_t asked = 0;
	int rc = 0, index, count;

	ei_x_new(&bindings);
	ei_x_new(&exprs);
	/* the syntax first, then what only this node can say */
	for (size_t i = 0; i < n; i++) {
		char name[MAXNODELEN + 1];
		uint32_t creation;
		int form = fp_pid_parse_full(texts[i], &pids[i], name,
					     sizeof(name), &creation);

		if (form < 0)
			states[i] = FP_PID_INVALID;
		else if (form == 1 && strcmp(name, fp_node_name(node)) != 0)
			states[i] = FP_PID_OTHER_NODE;
		else if (form == 1 && creation != node->creation)
			states[i] = FP_PID_DEAD;	/* of an earlier run of the node */
		else
			states[i] = FP_PID_ALIVE;	/* for the node to judge */
		if (states[i] == FP_PID_ALIVE)
			asked++;
	}
	if (asked == 0)
		goto out;

	rc = node_expr_parse(node, check_source, &exprs, timeout_ms);
	if (rc < 0)
		goto out;
	ei_x_encode_list_header(&bindings, 1);
	ei_x_encode_tuple_header(&bindings, 2);
	ei_x_encode_atom(&bindings, "Strs");
	ei_x_encode_list_header(&bindings, (long)asked);
	for (size_t i = 0; i < n; i++) {
		char text[40];

		if (states[i] != FP_PID_ALIVE)
			continue;
		snprintf(text, sizeof(text), "<0.%u.%u>", pids[i].num, pids[i].serial);
		ei_x_encode_string(&bindings, text);
	}
	ei_x_encode_empty_list(&bindings);
	ei_x_encode_empty_list(&bindings);
	rc = node_eval_call(node, &exprs, &bindings, timeout_ms, &reply);
	if (rc < 0)
		goto out;

	index = reply.index;
	if (ei_decode_list_header(reply.buf, &index, &count) < 0 ||
	    (size_t)count != asked) {
		rc = -EPROTO;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char atom[MAXATOMLEN_UTF8];
		int arity;

		if (states[i] != FP_PID_ALIVE)
			continue;
		if (ei_decode_tuple_header(reply.buf, &index, &arity) < 0) {
			if (etf_decode_atom(reply.buf, &index, atom) < 0 ||
			    strcmp(atom, "invalid") != 0) {
				rc = -EPROTO;
				goto out;
			}
			states[i] = FP_PID_INVALID;
			continue;
		}
		if (arity != 2 || etf_decode_pid(reply.buf, &index, &pids[i]) < 0 ||
		    etf_decode_atom(reply.buf, &index, atom) < 0) {
			rc = -EPROTO;
			goto out;
		}
		states[i] = strcmp(atom, "true") == 0 ? FP_PID_ALIVE : FP_PID_DEAD;
	}
out:
	ei_x_free(&bindings);
	ei_x_free(&exprs);
	return rc;
}
