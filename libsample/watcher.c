/*
 * flame_profd — the node's watcher (fp/watcher.h).
 *
 * A system monitor or tracer must be a process on the node, and the
 * node's erlang:system_monitor/2 has one slot for the whole node: an
 * application (or recon, or observer) may hold it, and taking it would
 * blind them. So the watcher asks for a trace session of its own where
 * the node has them (trace:system/3, probed, never read from the
 * release): a session's monitor sits beside the node's and every other
 * session's, and the node destroys it when the watcher's handle goes.
 * Elsewhere it takes the slot only when erlang:system_monitor() says
 * nobody holds it; a holder that took it between the look and the set
 * gets its setting back at once. It traps the exit of its link to the
 * daemon's connection (which breaks on SIGKILL too), then clears the
 * slot only if it is still its own (the node also clears it when its
 * holder dies) and lets scheduler_wall_time go (reference-counted per
 * process, so the node would drop its count anyway).
 *
 * The monitor's messages can come faster than anyone should forward
 * them (a node collecting large heaps all the time): at most Rate a
 * second go to the daemon, the rest are counted and dropped; a tick
 * every Every ms says the count, the node's memory, the schedulers'
 * utilisation and the watcher's own time since the last tick, which the
 * daemon counts against its budget. It never waits on the connection:
 * a send the busy distribution port would suspend it for is dropped and
 * counted (nosuspend), so its mailbox cannot fill while it waits. Its code is Erlang source run by
 * the node's erl_eval (eval.c): nothing is loaded.
 */
#include <errno.h>
#include <string.h>

#include "conn.h"
#include "etf.h"
#include "eval.h"
#include "fp/log.h"
#include "fp/watcher.h"
#include "node-private.h"

/* Bindings: Daemon, Ref, Every, Rate, Mon ([{Event, Limit}] as the
 * node's monitor takes them), Memory, Util. Value: {watching, Mode, Got,
 * Watcher} with Got the events taken (Mode session or system_monitor),
 * the holder's pid (held) or []; or {error, Why}. */
static const char start_source[] =
	"(fun() -> "
	"Caller = self(), "
	"TRef = erlang:make_ref(), "
	"Watch = fun() -> "
	"  process_flag(trap_exit, true), "
	"  link(Daemon), "
	"  Self = self(), "
	"  Ws = erlang:system_info(wordsize), "
	"  Way = case Mon of "
	"          [] -> none; "
	"          _ -> case catch code:ensure_loaded(trace) of "
	"                 {module, trace} -> "
	"                   case erlang:function_exported(trace, system, 3) of "
	"                     true -> session; "
	"                     false -> slot "
	"                   end; "
	"                 _ -> slot "
	"               end "
	"        end, "
	"  Take = fun Take([], G) -> {system_monitor, G}; "
	"             Take([KV | T], G) -> "
	"               case catch erlang:system_monitor(Self, [KV | G]) of "
	"                 {'EXIT', _} -> Take(T, G); "
	"                 undefined -> Take(T, [KV | G]); "
	"                 {Self, _} -> Take(T, [KV | G]); "
	"                 Prev -> erlang:system_monitor(Prev), {held, Prev} "
	"               end "
	"         end, "
	"  {Mode, Got, S} = "
	"    case Way of "
	"      none -> {none, [], undefined}; "
	"      session -> "
	"        S0 = trace:session_create(flame_profd, Self, []), "
	"        {session, [K || {K, V} <- Mon, (catch trace:system(S0, K, V)) =:= ok], S0}; "
	"      slot -> "
	"        case erlang:system_monitor() of "
	"          undefined -> "
	"            case Take(Mon, []) of "
	"              {held, {H, _}} -> {held, H, undefined}; "
	"              {system_monitor, G} -> {system_monitor, [K || {K, _} <- G], undefined} "
	"            end; "
	"          {H, _} -> {held, H, undefined} "
	"        end "
	"    end, "
	"  Sched = erlang:system_info(schedulers), "
	"  Clear = fun() -> "
	"    case Mode of "
	"      system_monitor -> "
	"        case erlang:system_monitor() of "
	"          {Self, _} -> erlang:system_monitor(undefined); "
	"          _ -> ok "
	"        end; "
	"      session -> catch trace:session_destroy(S); "
	"      _ -> ok "
	"    end, "
	"    case Util of "
	"      true -> erlang:system_flag(scheduler_wall_time, false); "
	"      false -> ok "
	"    end "
	"  end, "
	"  Caller ! {Self, {watching, Mode, Got}}, "
	"  Busy = Mode =:= session orelse Mode =:= system_monitor orelse Memory orelse Util, "
	"  MqOn = case lists:keyfind(long_message_queue, 1, Mon) of "
	"          {_, {_, On}} -> On; "
	"          _ -> 0 "
	"        end, "
	"  Who = fun(P) when is_pid(P) -> list_to_binary(pid_to_list(P)); "
	"           (P) when is_port(P) -> list_to_binary(erlang:port_to_list(P)); "
	"           (_) -> <<>> "
	"        end, "
	"  Busy_ = fun(L) -> "
	"            {_, As, Ts} = lists:unzip3(lists:sublist(L, Sched)), "
	"            {lists:sum(As), lists:sum(Ts)} "
	"          end, "
	"  UtilOf = fun(undefined) -> {undefined, undefined}; "
	"              ({A0, T0}) -> "
	"                {A1, T1} = Busy_(lists:sort(erlang:statistics(scheduler_wall_time))), "
	"                {case T1 > T0 of "
	"                   true -> (A1 - A0) * 100 div (T1 - T0); "
	"                   false -> 0 "
	"                 end, {A1, T1}} "
	"           end, "
	"  U0 = case Util of "
	"         true -> erlang:system_flag(scheduler_wall_time, true), "
	"                 Busy_(lists:sort(erlang:statistics(scheduler_wall_time))); "
	"         false -> undefined "
	"       end, "
	"  Mono = fun() -> erlang:monotonic_time(microsecond) end, "
	"  Send = fun(Msg) -> erlang:send(Daemon, Msg, [nosuspend, noconnect]) end, "
	"  Loop = fun Loop(Win, Sent, Drop, Work, U) -> "
	"    receive "
	"      {monitor, P, K, Info} -> "
	"        T0 = Mono(), "
	"        {Win1, Sent1} = case T0 - Win >= 1000000 of "
	"                          true -> {T0, 0}; "
	"                          false -> {Win, Sent} "
	"                        end, "
	"        case Sent1 >= Rate of "
	"          true -> Loop(Win1, Sent1, Drop + 1, Work + Mono() - T0, U); "
	"          false -> "
	"            V = case {K, Info} of "
	"                  {long_message_queue, true} -> MqOn; "
	"                  {large_heap, _} when is_list(Info) -> "
	"                    (proplists:get_value(heap_block_size, Info, 0) + "
	"                     proplists:get_value(old_heap_block_size, Info, 0) + "
	"                     proplists:get_value(mbuf_size, Info, 0)) * Ws; "
	"                  {_, _} when is_list(Info) -> proplists:get_value(timeout, Info, 0); "
	"                  _ -> none "
	"                end, "
	"            case V of "
	"              none -> Loop(Win1, Sent1, Drop, Work + Mono() - T0, U); "
	"              _ -> case Send({Ref, {sysmon, K, Who(P), V}}) of "
	"                     ok -> Loop(Win1, Sent1 + 1, Drop, Work + Mono() - T0, U); "
	"                     _ -> Loop(Win1, Sent1, Drop + 1, Work + Mono() - T0, U) "
	"                   end "
	"            end "
	"        end; "
	"      {TRef, tick} -> "
	"        T0 = Mono(), "
	"        Mem = case Memory of "
	"                true -> case catch erlang:memory(total) of "
	"                          M when is_integer(M) -> M; "
	"                          _ -> undefined "
	"                        end; "
	"                false -> undefined "
	"              end, "
	"        {Pct, U1} = UtilOf(U), "
	"        erlang:send_after(Every, Self, {TRef, tick}), "
	"        case Send({Ref, {tick, Mem, Pct, Drop, Work + Mono() - T0}}) of "
	"          ok -> Loop(Win, Sent, 0, 0, U1); "
	"          _ -> Loop(Win, Sent, Drop, Work + Mono() - T0, U1) "
	"        end; "
	"      {'EXIT', Daemon, _} -> Clear(); "
	"      _ -> Loop(Win, Sent, Drop, Work, U) "
	"    end "
	"  end, "
	"  case Busy of "
	"    true -> erlang:send_after(Every, Self, {TRef, tick}), "
	"            Loop(Mono(), 0, 0, 0, U0); "
	"    false -> unlink(Daemon), Clear() "
	"  end "
	"end, "
	"W = spawn(Watch), "
	"M = erlang:monitor(process, W), "
	"receive "
	"  {W, {watching, Mode, Got}} -> "
	"    erlang:demonitor(M, [flush]), "
	"    {watching, Mode, case Got of "
	"                       _ when is_pid(Got) -> list_to_binary(pid_to_list(Got)); "
	"                       _ when is_list(Got) -> Got; "
	"                       _ -> [] "
	"                     end, W}; "
	"  {'DOWN', M, process, _, _} -> {error, down} "
	"after 5000 -> exit(W, kill), erlang:demonitor(M, [flush]), {error, timeout} "
	"end "
	"end)().";

static const char *const event_names[FP_WATCH_EVENTS] = {
	[FP_WATCH_LONG_GC] = "long_gc",
	[FP_WATCH_LONG_SCHEDULE] = "long_schedule",
	[FP_WATCH_LARGE_HEAP] = "large_heap",
	[FP_WATCH_LONG_MESSAGE_QUEUE] = "long_message_queue",
};

const char *
fp_watch_event_name(enum fp_watch_event e)
{
	return e < FP_WATCH_EVENTS ? event_names[e] : "?";
}

static int
event_of(const char *atom)
{
	for (int e = 0; e < FP_WATCH_EVENTS; e++) {
		if (strcmp(atom, event_names[e]) == 0)
			return e;
	}
	return -1;
}

/* The node's monitor fires at or above its limit, ours above: one more.
 * Its limits are small integers (ms, words, messages): capped. */
#define NODE_LIMIT_MAX 0x7fffffffu

static unsigned long
node_limit(uint64_t over, unsigned div)
{
	uint64_t v = over / div + 1;

	return v > NODE_LIMIT_MAX ? NODE_LIMIT_MAX : (unsigned long)v;
}

/* [{Event, Limit}] as erlang:system_monitor/2 and trace:system/3 take
 * them: long_message_queue is {Disable, Enable}. */
static void
encode_monitor(struct fp_node *node, ei_x_buff *x, const struct fp_watch_config *c)
{
	int n = 0;

	for (int e = 0; e < FP_WATCH_EVENTS; e++)
		n += c->want[e];
	if (n)
		ei_x_encode_list_header(x, n);
	for (int e = 0; e < FP_WATCH_EVENTS; e++) {
		unsigned long v;

		if (!c->want[e])
			continue;
		ei_x_encode_tuple_header(x, 2);
		ei_x_encode_atom(x, event_names[e]);
		switch (e) {
		case FP_WATCH_LARGE_HEAP:
			ei_x_encode_ulong(x, node_limit(c->over[e],
							node->wordsize ? node->wordsize : 8));
			break;
		case FP_WATCH_LONG_MESSAGE_QUEUE:
			v = node_limit(c->over[e], 1);
			ei_x_encode_tuple_header(x, 2);
			ei_x_encode_ulong(x, v / 2);
			ei_x_encode_ulong(x, v);
			break;
		default:
			ei_x_encode_ulong(x, node_limit(c->over[e], 1));
			break;
		}
	}
	ei_x_encode_empty_list(x);
}

static void
bind_atom(ei_x_buff *x, const char *var, const char *atom)
{
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, var);
	ei_x_encode_atom(x, atom);
}

static void
bind_ulong(ei_x_buff *x, const char *var, unsigned long v)
{
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, var);
	ei_x_encode_ulong(x, v);
}

static void
encode_bindings(struct fp_node *node, ei_x_buff *x,
		const struct fp_watch_config *c, uint64_t id)
{
	ei_x_encode_list_header(x, 7);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "Daemon");
	ei_x_encode_pid(x, ei_self(&node->ec));
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "Ref");
	node_encode_ref(node, x, id, false);
	bind_ulong(x, "Every", c->every_ms ? c->every_ms : 1000);
	bind_ulong(x, "Rate", c->rate ? c->rate : FP_WATCH_RATE_DEFAULT);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "Mon");
	encode_monitor(node, x, c);
	bind_atom(x, "Memory", c->memory ? "true" : "false");
	bind_atom(x, "Util", c->util ? "true" : "false");
	ei_x_encode_empty_list(x);
}

/* {watching, Mode, Got, Watcher}: Got a list of event atoms, or the
 * holder's pid as a binary */
static int
decode_start(const struct fp_reply *reply, struct fp_watch_start *st,
	     erlang_pid *watcher)
{
	char atom[MAXATOMLEN_UTF8];
	int index = reply->index, arity, type, size;

	memset(st, 0, sizeof(*st));
	if (ei_decode_tuple_header(reply->buf, &index, &arity) < 0 || arity != 4 ||
	    etf_decode_atom(reply->buf, &index, atom) < 0 ||
	    strcmp(atom, "watching") != 0 ||
	    etf_decode_atom(reply->buf, &index, atom) < 0)
		return -EPROTO;
	if (strcmp(atom, "none") == 0)
		st->mode = FP_WATCH_NONE;
	else if (strcmp(atom, "session") == 0)
		st->mode = FP_WATCH_SESSION;
	else if (strcmp(atom, "system_monitor") == 0)
		st->mode = FP_WATCH_SYSTEM_MONITOR;
	else if (strcmp(atom, "held") == 0)
		st->mode = FP_WATCH_HELD;
	else
		return -EPROTO;
	if (ei_get_type(reply->buf, &index, &type, &size) < 0)
		return -EPROTO;
	if (type == ERL_BINARY_EXT) {
		long len;

		if (size <= 0 || (size_t)size >= sizeof(st->holder) ||
		    ei_decode_binary(reply->buf, &index, st->holder, &len) < 0)
			return -EPROTO;
		st->holder[len] = '\0';
		for (long i = 0; i < len; i++) {
			char ch = st->holder[i];

			/* pid_to_list/1's text, nothing else is shown */
			if (ch != '<' && ch != '>' && ch != '.' &&
			    (ch < '0' || ch > '9'))
				return -EPROTO;
		}
	} else if (type == ERL_NIL_EXT) {
		if (ei_skip_term(reply->buf, &index) < 0)
			return -EPROTO;
	} else {
		if (ei_decode_list_header(reply->buf, &index, &arity) < 0)
			return -EPROTO;
		for (int i = 0; i < arity; i++) {
			int e;

			if (etf_decode_atom(reply->buf, &index, atom) < 0)
				return -EPROTO;
			e = event_of(atom);
			if (e >= 0)
				st->got[e] = true;
		}
		if (arity && ei_skip_term(reply->buf, &index) < 0)	/* the tail */
			return -EPROTO;
	}
	if (ei_decode_pid(reply->buf, &index, watcher) < 0)
		return -EPROTO;
	return 0;
}

int
fp_node_watch_start(struct fp_node *node, const struct fp_watch_config *c,
		    struct fp_watch_start *st, unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff bindings, exprs;
	uint64_t id;
	int rc;

	node->watch_id = 0;
	ei_x_new(&bindings);
	ei_x_new(&exprs);
	rc = node_expr_parse(node, start_source, &exprs, timeout_ms);
	if (rc < 0)
		goto out;
	id = ++node->next_id;
	encode_bindings(node, &bindings, c, id);
	rc = node_eval_call(node, &exprs, &bindings, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	rc = decode_start(&reply, st, &node->watcher);
	if (rc == 0)
		node->watch_id = id;
out:
	ei_x_free(&bindings);
	ei_x_free(&exprs);
	return rc;
}

uint64_t
fp_node_watch_id(const struct fp_node *node)
{
	return node->fd >= 0 ? node->watch_id : 0;
}

bool
node_watcher_exited(struct fp_node *node, const erlang_pid *from)
{
	if (!node->watch_id || !node_same_pid(from, &node->watcher))
		return false;
	node->watch_id = 0;
	fp_log(FP_LOG_WARNING, "%s: the watcher process exited: the triggers it served are off until the next connect",
	       node->target);
	return true;
}

/* an integer, or undefined as -1 */
static int
decode_maybe_int(const char *buf, int *index, int64_t *v)
{
	char atom[MAXATOMLEN_UTF8];
	int i = *index;

	if (etf_decode_atom(buf, &i, atom) == 0) {
		if (strcmp(atom, "undefined") != 0)
			return -EBADMSG;
		*v = -1;
		*index = i;
		return 0;
	}
	if (etf_decode_int(buf, index, v) < 0 || *v < 0)
		return -EBADMSG;
	return 0;
}

int
fp_node_watch_decode(const struct fp_reply *reply, struct fp_watch_msg *m)
{
	char atom[MAXATOMLEN_UTF8];
	const char *buf = reply->buf;
	int index = reply->index, arity, type, size, e;
	int64_t v;
	long len;

	memset(m, 0, sizeof(*m));
	if (!reply->checked || reply->badrpc ||
	    ei_decode_tuple_header(buf, &index, &arity) < 0 ||
	    etf_decode_atom(buf, &index, atom) < 0)
		return -EBADMSG;
	if (strcmp(atom, "tick") == 0) {
		if (arity != 5 ||
		    decode_maybe_int(buf, &index, &m->memory) < 0 ||
		    decode_maybe_int(buf, &index, &m->util) < 0)
			return -EBADMSG;
		if (etf_decode_int(buf, &index, &v) < 0 || v < 0)
			return -EBADMSG;
		m->dropped = (uint64_t)v;
		if (etf_decode_int(buf, &index, &v) < 0)
			return -EBADMSG;
		/* the node's monotonic clock does not go back; a negative
		 * sum would be a bug of ours: counted as nothing */
		m->work_us = v > 0 ? (uint64_t)v : 0;
		m->tick = true;
		return 0;
	}
	if (strcmp(atom, "sysmon") != 0 || arity != 4 ||
	    etf_decode_atom(buf, &index, atom) < 0 ||
	    (e = event_of(atom)) < 0 ||
	    ei_get_type(buf, &index, &type, &size) < 0 || type != ERL_BINARY_EXT ||
	    size < 0 || (size_t)size >= sizeof(m->pid) ||
	    ei_decode_binary(buf, &index, m->pid, &len) < 0 ||
	    etf_decode_int(buf, &index, &m->value) < 0 || m->value < 0)
		return -EBADMSG;
	m->pid[len] = '\0';
	/* the node's text: pid_to_list/1 or port_to_list/1 output, nothing
	 * else is shown */
	for (long i = 0; i < len; i++) {
		char ch = m->pid[i];

		if (!((ch >= '0' && ch <= '9') || ch == '<' || ch == '>' ||
		      ch == '.' || ch == '#' || (ch >= 'A' && ch <= 'z' &&
		      (ch < '[' || ch > '`'))))
			return -EBADMSG;
	}
	m->event = (enum fp_watch_event)e;
	return 0;
}
