/*
 * flame_profd — the node's janitor: what the daemon changes on a node is
 * put back by the node itself, whenever and however the daemon goes.
 *
 * The daemon raises the node's backtrace_depth flag for deeper stacks.
 * Restoring it from the daemon fails whenever the daemon cannot say
 * goodbye (SIGKILL, a lost connection, a crash) and goes wrong when two
 * daemons overlap (the first to leave cuts the other's stacks; the last
 * puts back what the first had set). So the flag is held by one process
 * on the node, registered as flame_profd_janitor and shared by every
 * daemon attached: it keeps the depth the node had before the first
 * daemon came, links to each attached daemon (a C node's pid: the link
 * breaks when the connection goes, for any reason; it traps the exit), sets
 * the flag to the deepest depth any attached daemon asked for (never
 * below the node's own), and when the last daemon has gone puts the
 * flag back, lets rex shrink its heap (every rpc reply passes through
 * rex, which otherwise keeps the space its largest reply needed), and
 * exits. Its code is Erlang source run by the node's erl_eval (eval.c):
 * nothing is loaded.
 */
#include <errno.h>
#include <string.h>

#include "conn.h"
#include "etf.h"
#include "eval.h"
#include "fp/log.h"
#include "node-private.h"

/* Bindings: Daemon (our pid), Depth. Value: {attached, Orig, Now} or
 * {error, Why}. Registration races between two daemons starting at once
 * end with one janitor: the loser exits normally, its caller sees it go
 * and asks the winner. */
static const char attach_source[] =
	"(fun() -> "
	"Janitor = fun() -> "
	"  case catch register(flame_profd_janitor, self()) of "
	"    true -> "
	"      process_flag(trap_exit, true), "
	"      Level = fun(Orig, Ds) -> lists:max([Orig | [X || {_, X} <- Ds]]) end, "
	"      Loop = fun Loop(Orig, Ds) -> "
	"        {O, Ds1, Reply} = "
	"          receive "
	"            {attach, From, Tag, D, Want} -> "
	"              O0 = case Orig of "
	"                     undefined -> erlang:system_flag(backtrace_depth, Want); "
	"                     _ -> Orig "
	"                   end, "
	"              true = link(D), "
	"              {O0, [{D, Want} | Ds], {From, Tag, attached}}; "
	"            {detach, From, Tag, D} -> "
	"              unlink(D), "
	"              {Orig, [E || {P, _} = E <- Ds, P =/= D], {From, Tag, detached}}; "
	"            {'EXIT', D, _} -> "
	"              {Orig, [E || {P, _} = E <- Ds, P =/= D], none}; "
	"            _ -> "
	"              {Orig, Ds, none} "
	"          end, "
	"        Now = case O of "
	"                undefined -> undefined; "
	"                _ -> Cur = Level(O, Ds1), "
	"                     erlang:system_flag(backtrace_depth, Cur), "
	"                     Cur "
	"              end, "
	"        case Reply of "
	"          {F, T, What} -> F ! {T, {What, O, Now}}; "
	"          none -> ok "
	"        end, "
	"        case Ds1 of "
	"          [] -> unregister(flame_profd_janitor), "
	"                case whereis(rex) of "
	"                  undefined -> ok; "
	"                  Rex -> erlang:garbage_collect(Rex) "
	"                end; "
	"          _ -> Loop(O, Ds1) "
	"        end "
	"      end, "
	"      Loop(undefined, []); "
	"    _ -> lost "
	"  end "
	"end, "
	"Attach = fun Attach(0) -> {error, no_janitor}; "
	"             Attach(N) -> "
	"               J = case whereis(flame_profd_janitor) of "
	"                     undefined -> spawn(Janitor); "
	"                     P -> P "
	"                   end, "
	"               M = erlang:monitor(process, J), "
	"               Tag = erlang:make_ref(), "
	"               J ! {attach, self(), Tag, Daemon, Depth}, "
	"               receive "
	"                 {Tag, Reply} -> erlang:demonitor(M, [flush]), Reply; "
	"                 {'DOWN', M, process, _, _} -> Attach(N - 1) "
	"               after 5000 -> erlang:demonitor(M, [flush]), {error, timeout} "
	"               end "
	"           end, "
	"Attach(5) "
	"end)().";

/* Bindings: Daemon. Value: {detached, Orig, Now}, or detached when no
 * janitor holds us (it went, or never came). */
static const char detach_source[] =
	"case whereis(flame_profd_janitor) of "
	"  undefined -> detached; "
	"  J -> M = erlang:monitor(process, J), "
	"       Tag = erlang:make_ref(), "
	"       J ! {detach, self(), Tag, Daemon}, "
	"       receive "
	"         {Tag, Reply} -> erlang:demonitor(M, [flush]), Reply; "
	"         {'DOWN', M, process, _, _} -> detached "
	"       after 5000 -> erlang:demonitor(M, [flush]), {error, timeout} "
	"       end "
	"end.";

static void
encode_bindings(struct fp_node *node, ei_x_buff *x, bool depth, unsigned value)
{
	ei_x_encode_list_header(x, depth ? 2 : 1);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "Daemon");
	ei_x_encode_pid(x, ei_self(&node->ec));
	if (depth) {
		ei_x_encode_tuple_header(x, 2);
		ei_x_encode_atom(x, "Depth");
		ei_x_encode_ulong(x, value);
	}
	ei_x_encode_empty_list(x);
}

/* {Tag, Orig, Now} with Tag @tag and both depths integers */
static int
decode_depths(const struct fp_reply *reply, const char *tag, unsigned *orig,
	      unsigned *now)
{
	char atom[MAXATOMLEN_UTF8];
	int index = reply->index, arity;
	int64_t o, n;

	if (ei_decode_tuple_header(reply->buf, &index, &arity) < 0 || arity != 3 ||
	    etf_decode_atom(reply->buf, &index, atom) < 0 || strcmp(atom, tag) ||
	    etf_decode_int(reply->buf, &index, &o) < 0 ||
	    etf_decode_int(reply->buf, &index, &n) < 0 ||
	    o < 0 || n < 0 || o > 1000000 || n > 1000000)
		return -EPROTO;
	*orig = (unsigned)o;
	*now = (unsigned)n;
	return 0;
}

int
fp_node_depth_attach(struct fp_node *node, unsigned depth, unsigned *orig,
		     unsigned *now, unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff bindings, exprs;
	int rc;

	ei_x_new(&bindings);
	ei_x_new(&exprs);
	rc = node_expr_parse(node, attach_source, &exprs, timeout_ms);
	if (rc < 0)
		goto out;
	encode_bindings(node, &bindings, true, depth);
	rc = node_eval_call(node, &exprs, &bindings, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	rc = decode_depths(&reply, "attached", orig, now);
	if (rc == 0)
		node->depth_attached = true;
out:
	ei_x_free(&bindings);
	ei_x_free(&exprs);
	return rc;
}

int
fp_node_depth_detach(struct fp_node *node, unsigned *orig, unsigned *now,
		     unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff bindings, exprs;
	int rc, index;

	if (!node->depth_attached)
		return -ENOENT;
	ei_x_new(&bindings);
	ei_x_new(&exprs);
	rc = node_expr_parse(node, detach_source, &exprs, timeout_ms);
	if (rc < 0)
		goto out;
	encode_bindings(node, &bindings, false, 0);
	rc = node_eval_call(node, &exprs, &bindings, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	node->depth_attached = false;
	index = reply.index;
	if (ei_decode_atom(reply.buf, &index, NULL) == 0) {
		/* the janitor had gone: it put the flag back then */
		rc = -ENOENT;
		goto out;
	}
	rc = decode_depths(&reply, "detached", orig, now);
out:
	ei_x_free(&bindings);
	ei_x_free(&exprs);
	return rc;
}
