/*
 * flame_profd — the selection scan: a window of the node's process table
 * and the reductions of what is in it, cut on the node, in one request;
 * or, at the first selection of a connection, a sweep of the whole table
 * that leaves the node with only its top candidates.
 *
 * erlang:processes() on a node of a million processes is a 25 MB reply
 * that rex copies and holds; the window is cut where the table is, so a
 * reply carries at most about scan_max pids. Where the node can walk its
 * table in steps (erlang:processes_iterator/0 and processes_next/1, OTP
 * 28 and later) no whole pid list is ever built; before that the rex
 * worker builds it and drops it, and only the window leaves. The per-pid
 * loops are stock compiled code (lists:zipwith/3 over
 * erlang:process_info/2, lists:filter/2, lists:sublist/3); erl_eval only
 * glues them together — except the iterator's steps, which take an
 * interpreted fun each (about 0.7 µs: measured on OTP 29, the only fun
 * shape that stays that cheap is one whose first clause matches its
 * argument and whose body binds nothing; a first clause that fails on it,
 * or a case in the body, costs 14-50 µs). So the walk carries what
 * processes_next/1 last returned, {Pid, Iterator} or none, and each step
 * hands out that pid and calls it again: the end of the table (none) is
 * a state like any other, and the second clause keeps it.
 *
 * A window finds a busy process only when it reaches it: on a node of a
 * million processes whose busy ones were started last, 20 selections
 * later. The sweep reads every process once, in chunks of SWEEP_CHUNK,
 * and keeps on the node only the Len that did the most reductions in
 * their lives (what the node counts; a rate needs two readings): a
 * process busy now has done more than the idle ones around it, whatever
 * its place in the table. It stops at the first chunk boundary after Ms
 * milliseconds, so that it ends well within the request's timeout on a
 * node too big or too busy to be read in one go, and says where the
 * windows go on. The filter is compiled code too: each chunk's
 * readings are raised to the threshold {reductions, Thr}
 * (erlang:max/2), and proplists:delete/2 drops every pair whose key is
 * the threshold, so only the processes above it are kept; when more
 * than 2 * Len are kept they are sorted, cut to Len, and the threshold
 * rises to the least of them. The next selection reads the candidates
 * again and ranks them by delta.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "etf.h"
#include "eval.h"
#include "node-private.h"
#include "request.h"
#include "util-mem.h"

/* The value is {full | window, ProcessCount, Pids, Reductions, Next}:
 * Pids what the window read (every process, when there are at most Max)
 * but the rex worker running the scan (it is busy, so it would rank first,
 * and is gone by the time it is sampled), Reductions what process_info(P, reductions) said of Keep ++ Pids in
 * that order (just Pids when full), Next where the next window starts
 * (start: at the beginning). */
#define SCAN_HEAD \
	"(fun() -> " \
	"Count = erlang:system_info(process_count), " \
	"Reds = fun(Ps) -> lists:zipwith(fun erlang:process_info/2, Ps, " \
	"                    lists:duplicate(length(Ps), reductions)) end, " \
	"case Count =< Max of " \
	"  true -> " \
	"    All = lists:delete(self(), erlang:processes()), " \
	"    {full, Count, All, Reds(All), start}; " \
	"  false -> "

/* The iterator's step (see above). */
#define ITER_TAKE \
	"    Take = fun(_, {P, It}) -> {P, erlang:processes_next(It)}; " \
	"              (_, none) -> {none, none} end, "
#define ITER_BEGIN "erlang:processes_next(erlang:processes_iterator())"

/* The sweep's filter (see above): Add takes a chunk of pids into the
 * state {Kept, N, Thr}, N = length(Kept), Kept pairs of {{reductions, R},
 * Pid}. The rex worker is busy walking and gone by the next selection:
 * it is dropped. */
#define SWEEP_CHUNK "10000"
#define SWEEP_FILTER \
	"    Trim = fun(Acc, N, Thr) when N =< 2 * Len -> {Acc, N, Thr}; " \
	"              (Acc, N, _) -> T = lists:nthtail(N - Len, lists:sort(Acc)), " \
	"                             {T, Len, element(2, element(1, hd(T)))} end, " \
	"    Add = fun(Ps, {Acc, N, Thr}) -> " \
	"            Min = {reductions, Thr}, " \
	"            Dup = lists:duplicate(length(Ps), Min), " \
	"            New = proplists:delete(Min, lists:zip(lists:zipwith(" \
	"                    fun erlang:max/2, Reds(Ps), Dup), Ps)), " \
	"            Trim(New ++ Acc, N + length(New), Thr) " \
	"          end, "
/* Walk gives {St, Next, Read}: Next is where a window goes on (start
 * when the walk reached the end), Read the processes read. */
#define SWEEP_TAIL \
	"    {{Kept, Nk, _}, Next, Read} = Walk(Begin, {[], 0, 0}, 0), " \
	"    {Rs, Cs} = lists:unzip(lists:keydelete(self(), 2, " \
	"                 lists:nthtail(erlang:max(0, Nk - Len), lists:sort(Kept)))), " \
	"    {sweep, Count, Cs, Reds(Keep) ++ Rs, Next, Read} " \
	"end " \
	"end)()."
/* A sweep stops at its first chunk boundary after Ms milliseconds: the
 * windows go on from there. */
#define SWEEP_CLOCK \
	"    Stop = erlang:monotonic_time(millisecond) + Ms, " \
	"    Late = fun() -> erlang:monotonic_time(millisecond) > Stop end, "

/* The sweep over erlang:processes(), a chunk split off at a time; Next
 * a position in it, as the windows take it.
 *
 * erlang:processes() builds its list in heap fragments, a slice at a
 * time (its pids are gathered in a buffer of a word each first), and the
 * walk's first garbage collections copy it into a young heap and then an
 * old one: on OTP 25 at a million processes the worker's heap reached
 * 39 MiB, where erlang:processes() alone leaves 24 MiB. One full
 * collection right after it moves the list into one heap of its size;
 * the walk's garbage is collected beside it from then on, and the peak
 * is erlang:processes()'s own (bench/scan --alone, docs/PERFORMANCE.md). */
static const char sweep_sublist_source[] =
	SCAN_HEAD
	SWEEP_FILTER
	SWEEP_CLOCK
	"    Walk = fun W([], S, N) -> {S, start, N}; "
	"               W(Ps, S, N) -> case Late() of "
	"                 true -> {S, N + 1, N}; "
	"                 false -> {C, R} = try lists:split(" SWEEP_CHUNK ", Ps) "
	"                                   catch error:badarg -> {Ps, []} end, "
	"                          W(R, Add(C, S), N + length(C)) end end, "
	"    Begin = erlang:processes(), "
	"    erlang:garbage_collect(), "
	SWEEP_TAIL;

/* The sweep with the iterator, a chunk of steps at a time. Take comes
 * first: an interpreted fun's call costs more the more funs were bound
 * before it was made (OTP 29, 500 000 processes: 0.7 s for the sweep
 * with Take made before Trim, Add and Late, 2.2 s after them). */
static const char sweep_iterator_source[] =
	SCAN_HEAD
	ITER_TAKE
	SWEEP_FILTER
	SWEEP_CLOCK
	"    Seq = lists:seq(1, " SWEEP_CHUNK "), "
	"    Walk = fun W(none, S, N) -> {S, start, N}; "
	"               W(I, S, N) -> case Late() of "
	"                 true -> {S, I, N}; "
	"                 false -> {C, I1} = lists:mapfoldl(Take, I, Seq), "
	"                          Ps = lists:filter(fun erlang:is_pid/1, C), "
	"                          W(I1, Add(Ps, S), N + length(Ps)) end end, "
	"    Begin = " ITER_BEGIN ", "
	SWEEP_TAIL;

/* Step from Cursor (a position in erlang:processes()), Len pids. */
static const char scan_sublist_source[] =
	SCAN_HEAD
	"    S = case Cursor of start -> 1; _ -> Cursor end, "
	"    W = lists:delete(self(), lists:sublist(erlang:processes(), S, Len)), "
	"    Next = case S + Step > Count of true -> start; false -> S + Step end, "
	"    {window, Count, W, Reds(Keep ++ W), Next} "
	"end "
	"end)().";

/* Cursor is what processes_next/1 last returned; the window is Step
 * pids, then Len - Step more from where it had reached (Next), so that
 * the next window starts half-way into this one. */
static const char scan_iterator_source[] =
	SCAN_HEAD
	"    I0 = case Cursor of start -> " ITER_BEGIN "; _ -> Cursor end, "
	ITER_TAKE
	"    {W1, I1} = lists:mapfoldl(Take, I0, lists:seq(1, Step)), "
	"    {W2, _} = lists:mapfoldl(Take, I1, lists:seq(1, Len - Step)), "
	"    W = lists:delete(self(), lists:filter(fun erlang:is_pid/1, W1 ++ W2)), "
	"    Next = case I1 of none -> start; _ -> I1 end, "
	"    {window, Count, W, Reds(Keep ++ W), Next} "
	"end "
	"end)().";

int
fp_node_scan_prepare(struct fp_node *node, unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff args, parsed;
	char atom[MAXATOMLEN_UTF8];
	int rc, index;
	bool iter;

	if (node->fd < 0)
		return -ENOTCONN;
	ei_x_new(&args);
	ei_x_new(&parsed);
	/* Asked, not read off the release: a backport or a patched node may
	 * have it, a stripped one may not. */
	ei_x_encode_list_header(&args, 3);
	ei_x_encode_atom(&args, "erlang");
	ei_x_encode_atom(&args, "processes_next");
	ei_x_encode_long(&args, 1);
	ei_x_encode_empty_list(&args);
	rc = node_call(node, "erlang", "function_exported", &args, timeout_ms,
		       &reply);
	if (rc < 0)
		goto out;
	index = reply.index;
	if (etf_decode_atom(reply.buf, &index, atom) < 0 ||
	    (strcmp(atom, "true") && strcmp(atom, "false"))) {
		rc = -EPROTO;
		goto out;
	}
	iter = strcmp(atom, "true") == 0;
	rc = node_expr_parse(node, iter ? scan_iterator_source : scan_sublist_source,
			     &parsed, timeout_ms);
	if (rc < 0)
		goto out;
	node->scan_exprs = xrealloc(node->scan_exprs, (size_t)parsed.index);
	memcpy(node->scan_exprs, parsed.buff, (size_t)parsed.index);
	node->scan_len = (size_t)parsed.index;
	parsed.index = 0;
	rc = node_expr_parse(node, iter ? sweep_iterator_source : sweep_sublist_source,
			     &parsed, timeout_ms);
	if (rc < 0)
		goto out;
	node->sweep_exprs = xrealloc(node->sweep_exprs, (size_t)parsed.index);
	memcpy(node->sweep_exprs, parsed.buff, (size_t)parsed.index);
	node->sweep_len = (size_t)parsed.index;
	node->scan_iter = iter;
	node->scan_connects = node->connects;
out:
	ei_x_free(&args);
	ei_x_free(&parsed);
	return rc;
}

bool
fp_node_scan_iterates(const struct fp_node *node)
{
	return node->scan_exprs && node->scan_connects == node->connects &&
	       node->scan_iter;
}

static void
encode_binding(ei_x_buff *x, const char *name)
{
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, name);
}

int
fp_node_scan_request(struct fp_node *node, const struct fp_scan *scan,
		     uint64_t *id)
{
	ei_x_buff bindings, parsed = { 0 };
	int rc;

	if (node->fd < 0 || !node->scan_exprs ||
	    node->scan_connects != node->connects)
		return -ENOTCONN;
	if (scan->step > scan->len || scan->len == 0)
		return -EINVAL;
	ei_x_new(&bindings);
	ei_x_encode_list_header(&bindings, 6);
	encode_binding(&bindings, "Keep");
	node_encode_pid_list(node, &bindings, scan->keep, scan->nkeep);
	encode_binding(&bindings, "Max");
	ei_x_encode_ulonglong(&bindings, scan->max);
	encode_binding(&bindings, "Len");
	ei_x_encode_ulonglong(&bindings, scan->len);
	encode_binding(&bindings, "Step");
	ei_x_encode_ulonglong(&bindings, scan->step);
	encode_binding(&bindings, "Ms");
	ei_x_encode_ulonglong(&bindings, scan->sweep_ms);
	encode_binding(&bindings, "Cursor");
	if (scan->cursor_len)
		ei_x_append_buf(&bindings, scan->cursor, (int)scan->cursor_len);
	else
		ei_x_encode_atom(&bindings, "start");
	ei_x_encode_empty_list(&bindings);

	/* node_eval_send() reads the parse tree only */
	parsed.buff = scan->sweep ? node->sweep_exprs : node->scan_exprs;
	parsed.index = (int)(scan->sweep ? node->sweep_len : node->scan_len);
	rc = node_eval_send(node, &parsed, &bindings, true, id);
	ei_x_free(&bindings);
	return rc;
}
