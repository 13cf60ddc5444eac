/*
 * flame_profd — a hidden C-node connection to the profiled node.
 *
 * Everything the daemon asks of the node is an rpc through the node's own
 * `rex` server to a stock OTP function; nothing is loaded onto the node,
 * unless the caller asks for FP_REQUEST_HELPER.
 * Requests are asynchronous: fp_node_*_request() sends and returns an id,
 * fp_node_receive() hands back replies as they arrive. Replies carry the
 * reference of their request, so late replies to requests the caller has
 * given up on are recognised and dropped.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fp/term.h"

struct fp_node;

/** How sample batches are requested (fp_node_set_request_path()). */
enum fp_request_path {
	/* rpc through rex to lists:zipwith/3 over erlang:process_info/2:
	 * stock functions only, nothing runs on the node between batches */
	FP_REQUEST_REX = 0,
	/* FP_EVAL_SAMPLERS long-lived processes running a fun that the
	 * node's erl_eval interprets (no module loaded), linked to the
	 * daemon's connection: less node time per sample, opt-in */
	FP_REQUEST_EVAL,
	/* a module loaded onto the node for this connection, explicitly
	 * asked for: one process samples on the node's own timer and sends
	 * what it took a few times a second (fp_node_helper_config(),
	 * fp_node_batch_open()); it and its module go with the connection */
	FP_REQUEST_HELPER,
};

#define FP_EVAL_SAMPLERS 3

/**
 * Check a node name of the form alive@host.
 *
 * @return 0, or -EINVAL with *why set to a static explanation.
 */
int
fp_node_name_check(const char *name, const char **why);

/**
 * @param target  alive@host of the node to profile (copied)
 * @param cookie  the node's cookie (copied; never logged)
 * @return a new node handle, not yet connected. Caller owns it and frees
 *         it with fp_node_destroy().
 */
struct fp_node *
fp_node_new(const char *target, const char *cookie);

/** Before fp_node_connect(): how sample batches are requested. */
void
fp_node_set_request_path(struct fp_node *node, enum fp_request_path path);

/**
 * The request path in use: the one asked for, except FP_REQUEST_REX
 * where the node would not load the helper module of FP_REQUEST_HELPER
 * (a release older than the erlc that built it; logged once, not tried
 * again on that handle).
 */
enum fp_request_path
fp_node_request_path(const struct fp_node *node);

/**
 * Connect to @host:@port instead of asking epmd on the node's host (a
 * local tunnel in front of a TLS-distribution node, for one). The
 * handshake still names the node. @host is copied.
 */
void
fp_node_set_address(struct fp_node *node, const char *host, unsigned port);

/** The longest a wait inside the library goes without asking give_up. */
#define FP_NODE_SLICE_MS 100

/**
 * Every wait inside the library (the epmd lookup, the TCP connect and
 * the handshake, a synchronous call, a message half read, a send into a
 * full socket) waits in slices of at most FP_NODE_SLICE_MS and, whenever
 * it would block, asks @give_up(@data). When that returns true the wait
 * ends and the call returns -ECANCELED; if the wait was inside a message
 * (a send or a receive cut short), the connection is closed without
 * another word on it. NULL (the default): waits run to their timeouts.
 */
void
fp_node_set_give_up(struct fp_node *node, bool (*give_up)(void *data),
		    void *data);

/**
 * The nodes epmd on @host knows, as epmd's NAMES request lists them:
 * @each(@alive, @data) for each name part (valid during the call only;
 * the text is epmd's, unchecked). Waits at most @timeout_ms for each of
 * the connect and the reads; reads at most 1 MiB.
 *
 * @return 0, or -EHOSTUNREACH (the host does not resolve),
 *         -ECONNREFUSED (no epmd answers), -ETIMEDOUT, -EPROTO (the
 *         answer is no NAMES reply), or another negative errno.
 */
int
fp_epmd_names(const char *host, unsigned timeout_ms,
	      void (*each)(const char *alive, void *data), void *data);

/** Disconnects and frees; NULL is a no-op. */
void
fp_node_destroy(struct fp_node *node);

/**
 * Connect (epmd lookup, handshake, a few setup calls). A connect given
 * up on (-ECANCELED) leaves nothing on the node: what it started there
 * (eval samplers, the helper) is linked to the connection, which is
 * closed.
 *
 * @return 0, or
 *   -EHOSTUNREACH  the host part does not resolve,
 *   -ECONNREFUSED  no epmd answers on the host (node down),
 *   -ENOENT        epmd does not know the node (node down),
 *   -EACCES        the node refused the handshake (wrong cookie, or the
 *                  node uses the other kind of names),
 *   -ETIMEDOUT     no answer within @timeout_ms,
 *   -EPROTO        the node answered the setup calls with nonsense,
 *   -ECANCELED     given up (fp_node_set_give_up()),
 *   -EIO           any other failure.
 */
int
fp_node_connect(struct fp_node *node, unsigned timeout_ms);

/** Close the connection (if any); the handle can connect again. */
void
fp_node_disconnect(struct fp_node *node);

/** The socket to poll for input, or -1 when not connected. */
int
fp_node_fd(const struct fp_node *node);

/** The name the node answers to (its rex's node), which can differ from
 * the one it was reached by (another host name for the same host);
 * the name given before the first connect. */
const char *
fp_node_name(const struct fp_node *node);

/** Our own node name (alive@host), valid after a connect attempt. */
const char *
fp_node_self_name(const struct fp_node *node);

/** The node's OTP release, e.g. "25"; "" before the first connect. */
const char *
fp_node_otp_release(const struct fp_node *node);

/** The pid of the node's rex server, which serves our requests. */
struct fp_pid
fp_node_rex_pid(const struct fp_node *node);

/** Bytes per word on the node (4 or 8). */
unsigned
fp_node_wordsize(const struct fp_node *node);

/** erlang:system_info(schedulers_online) at connect (at least 1). */
unsigned
fp_node_schedulers(const struct fp_node *node);

/**
 * Ask the node for its OS process id (os:getpid/0 through rex, inside
 * timer:tc/3). Synchronous; one request. The pid is the node's own
 * view: in another pid namespace it names another process here, or
 * none.
 *
 * @param[out] os_pid the pid
 * @param[out] us     what the call took on the node, for the cost model
 * @return 0, -EPROTO (the node answered with something else, or
 *         {badrpc, _}), or as fp_node_receive() (-ECANCELED included).
 */
int
fp_node_os_pid(struct fp_node *node, unsigned timeout_ms, pid_t *os_pid,
	       uint64_t *us);

/**
 * Whether the node runs on this host: its end of the connection has our
 * end's address, or a loopback one. Then the daemon's own CPU time is
 * taken from the node's cores. Of the last connection; false before one.
 */
bool
fp_node_is_local(const struct fp_node *node);

/**
 * A reply to an asynchronous request. The term lives in the node's
 * receive buffer and is valid until the next call on this node.
 */
struct fp_reply {
	uint64_t id;
	bool badrpc;		/* {badrpc, Reason}: the call failed on the node */
	const char *buf;	/* external term format */
	size_t len;		/* bytes in buf */
	int index;		/* where the result term starts in buf */
	/* The result passed the bounds check on arrival. Sample batches
	 * arrive unchecked: fp_sampler_decode() checks what it reads as it
	 * reads it, so a stack it has seen before is compared, not walked
	 * twice. Every other decoder checks an unchecked result first. */
	bool checked;
};

/**
 * Read what the socket has: one message. Distribution ticks are answered
 * inside.
 *
 * @return 1 with *reply filled, 0 if the message was no reply for us
 *         (a tick, a stray message), -ECONNRESET when the connection is
 *         gone, -ETIMEDOUT when a started message did not complete within
 *         @timeout_ms, -ECANCELED when its wait was given up (the
 *         connection is then closed), -EBADMSG when a reply could not be
 *         decoded.
 */
int
fp_node_receive(struct fp_node *node, unsigned timeout_ms,
		struct fp_reply *reply);

/** What the node says of a pid a user named (fp_node_check_pids()). */
enum fp_pid_state {
	FP_PID_ALIVE = 0,
	FP_PID_DEAD,		/* no such process (now, or of this run of the node) */
	FP_PID_INVALID,		/* not a pid, or numbers this node does not take */
	FP_PID_OTHER_NODE,	/* the remote form names another node */
};

/**
 * Check pids as a user wrote them (fp_pid_parse_full()) against the
 * node: the remote form must name this node (fp_node_name()), and the
 * node itself turns each into a pid (erlang:list_to_pid/1) and says
 * whether it lives. A pid the node would not accept is never sent to it.
 * Synchronous; one request.
 *
 * @param[out] pids   the pid of each (meaningful when ALIVE or DEAD)
 * @param[out] states what the node said of each
 * @return 0, -EPROTO, or as fp_node_receive() (-ECANCELED included).
 */
int
fp_node_check_pids(struct fp_node *node, const char *const *texts, size_t n,
		   struct fp_pid *pids, enum fp_pid_state *states,
		   unsigned timeout_ms);

/**
 * Keep the node's backtrace_depth at @depth or deeper while this
 * connection lasts. The flag is held by the node's janitor, one process
 * (registered flame_profd_janitor, run by erl_eval: nothing is loaded)
 * shared by every flame_profd attached: it sets the deepest depth any of
 * them asked for, never less than the node's own, and puts the node's
 * own back when the last of them has detached or lost its connection
 * (SIGKILL included), then exits. Synchronous.
 *
 * @param[out] orig the node's own depth, from before the first daemon
 * @param[out] now  the depth in force now
 * @return 0, -EPROTO (the node answered otherwise: nothing was changed),
 *         or as fp_node_receive().
 */
int
fp_node_depth_attach(struct fp_node *node, unsigned depth, unsigned *orig,
		     unsigned *now, unsigned timeout_ms);

/**
 * Leave the janitor at once (a clean stop): the flag goes back to what
 * the daemons still attached need, or to the node's own.
 *
 * @return 0 with the depths as above; -ENOENT when this connection was
 *         not attached, or the janitor had already gone; or as
 *         fp_node_receive().
 */
int
fp_node_depth_detach(struct fp_node *node, unsigned *orig, unsigned *now,
		     unsigned timeout_ms);

/**
 * The processes, reductions and sample requests run inside timer:tc/3 on
 * the node: their replies are {Microseconds, Result}. This takes the time
 * and moves reply->index to Result.
 *
 * @return 0 or -EBADMSG.
 */
int
fp_reply_take_time(struct fp_reply *reply, uint64_t *us);

/*
 * The requests below send and return: 0, or -ENOTCONN, -ETIMEDOUT (the
 * send did not go out in time), -ECONNRESET, or -ECANCELED (the send was
 * given up, fp_node_set_give_up(), and the connection closed).
 */

/** Request erlang:statistics(total_run_queue_lengths): a cheap probe. */
int
fp_node_health_request(struct fp_node *node, uint64_t *id);

/** Decode an integer reply. @return 0 or -EBADMSG. */
int
fp_node_decode_int(const struct fp_reply *reply, int64_t *value);

/**
 * Request erlang:nodes() (the visible nodes the node is connected to;
 * hidden ones, such as this connection, are not among them), timed
 * (fp_reply_take_time()): one BIF call whose work and reply grow with
 * the cluster only.
 */
int
fp_node_peers_request(struct fp_node *node, uint64_t *id);

/**
 * Decode the reply to fp_node_peers_request(), after
 * fp_reply_take_time(): @each(@name, @data) for each node name (an
 * atom's text, NUL-terminated, valid during the call only; the node's,
 * unchecked: fp_node_name_check() it). Nothing is handed out when the
 * reply is not a list of atoms.
 * @return the number of names, or -EBADMSG.
 */
int
fp_node_decode_peers(const struct fp_reply *reply,
		     void (*each)(const char *name, void *data), void *data);

/**
 * One selection scan (fp_select_plan() fills it): the reductions of
 * @keep and of a window of the node's process table, cut on the node, in
 * one request (timed). When the node has at most @max processes the
 * window is the whole table and @keep is not read twice. A @sweep reads
 * the table on the node from its beginning, for at most about @sweep_ms,
 * and answers with the @len processes that did the most reductions in
 * their lives and where it stopped (the cursor is not used).
 */
struct fp_scan {
	const struct fp_pid *keep;
	size_t nkeep;
	size_t max;		/* read everything up to this many processes */
	bool sweep;		/* else: every process, keeping the top len */
	size_t len;		/* else: pids in the window (at least 1) */
	size_t step;		/* ... where the next window starts in it */
	const char *cursor;	/* where this window starts: a term from the
				 * last reply (external format, no version
				 * byte); 0 bytes: at the beginning */
	size_t cursor_len;
	unsigned sweep_ms;	/* a sweep stops after this long (the
				 * caller sets it; 0: after one chunk) */
};

/**
 * Make ready the scan for this connection: ask the node whether it can
 * walk its process table in steps (erlang:processes_next/1, OTP 28 and
 * later) and have it parse the scan's source. Synchronous; once per
 * connection, before fp_node_scan_request().
 *
 * @return 0, -EPROTO (an unexpected answer), or as fp_node_receive().
 */
int
fp_node_scan_prepare(struct fp_node *node, unsigned timeout_ms);

/** Whether this connection's scan walks the table with an iterator
 * (false before fp_node_scan_prepare()). */
bool
fp_node_scan_iterates(const struct fp_node *node);

/**
 * Send one scan. The reply, after fp_reply_take_time(), is for
 * fp_select_scan().
 *
 * @return 0, -ENOTCONN (not connected, or not prepared on this
 *         connection), -EINVAL (a window of 0 pids, or a step past it),
 *         -ETIMEDOUT or -ECONNRESET (the send failed).
 */
int
fp_node_scan_request(struct fp_node *node, const struct fp_scan *scan,
		     uint64_t *id);

/** Request erlang:whereis/1 for each name (NUL-terminated atoms). */
int
fp_node_whereis_request(struct fp_node *node, const char *const *names,
			size_t n, uint64_t *id);

/** Request erlang:is_process_alive/1 for each pid. */
int
fp_node_alive_request(struct fp_node *node, const struct fp_pid *pids,
		      size_t n, uint64_t *id);

/** Decode a list of @n booleans. @return 0 or -EBADMSG. */
int
fp_node_decode_bools(const struct fp_reply *reply, bool *out, size_t n);

/**
 * Request what each pid was started as, timed (fp_reply_take_time()),
 * for fp_sampler_initial_calls(): the raw '$initial_call' proc_lib
 * recorded, read as process_info(P, {dictionary, '$initial_call'}) where
 * the node reads one key without copying the dictionary
 * (fp_node_reads_dict_keys()), else from a copy of the whole dictionary.
 * The node hands back only {Module, Function, Arity} with Arity 0..255
 * (never proc_lib:initial_call/1, which makes an atom per argument of
 * any arity the process set). An erl_eval expression, parsed at connect.
 *
 * @return 0, -ENOTCONN, or as the rpc send fails.
 */
int
fp_node_initial_call_request(struct fp_node *node, const struct fp_pid *pids,
			     size_t n, uint64_t *id);

/** Whether the node reads one key of a process dictionary without
 * copying the rest (probed at connect; OTP 26.2 and later). */
bool
fp_node_reads_dict_keys(const struct fp_node *node);

/**
 * What each full sample records besides the stack and the metrics, read
 * from the process dictionary one key at a time ({dictionary, Key}), never
 * by copying the dictionary: nothing is recorded where the node cannot
 * (fp_node_reads_dict_keys()). The process label is recorded wherever
 * the node has one (fp_node_label_source()), whatever this says.
 */
struct fp_extras {
	const char *const *keys;	/* dictionary keys (atoms) */
	size_t nkeys;
	/* keys of the Logger metadata map ('$logger_metadata$'): the
	 * dictionary's value is the whole map, copied, never the rest */
	const char *const *logger_keys;
	size_t nlogger_keys;
	bool callers;			/* '$callers' */
};

/**
 * Before fp_node_connect(): what full samples record besides the stack
 * and the metrics. The node keeps its own copy of the names.
 */
void
fp_node_set_extras(struct fp_node *node, const struct fp_extras *extras);

/** Where a node's process labels are read from (probed at connect). */
enum fp_label_source {
	FP_LABEL_NONE = 0,	/* not at all: OTP before 26.2 */
	FP_LABEL_ITEM,		/* process_info(P, label): OTP 27 and later */
	FP_LABEL_DICT,		/* {dictionary, '$process_label'} */
};

/** Where this node keeps process labels, as probed at connect. */
enum fp_label_source
fp_node_label_source(const struct fp_node *node);

/** Whether the keys and callers of fp_node_set_extras() are asked on
 * this connection (some were given and the node reads dictionary keys). */
bool
fp_node_records_keys(const struct fp_node *node);

/** What a sample request asks of one process. */
enum fp_ask {
	/* status and names (read from the process's state), then the stack
	 * and the counters (answered by the process itself) */
	FP_ASK_FULL = 0,
	/* the same, and initial_call with the names */
	FP_ASK_FULL_IC,
	/* only what a caller reads from the state of a process that is not
	 * running, without a signal: status, registered_name, reductions,
	 * message_queue_len, heap_size, stack_size and garbage_collection.
	 * Enough to tell whether the process has run since its last sample
	 * (fp_sampler_decode()); the process is neither scheduled nor
	 * charged a reduction for it. */
	FP_ASK_PROBE,
};

/**
 * Request one sample of each pid: lists:zipwith(fun erlang:process_info/2,
 * Pids, ItemLists), timed, as @asks[i] says for pid i (@asks NULL: every
 * pid FP_ASK_FULL). A FP_ASK_FULL pid is in Pids twice, once per item
 * list; a FP_ASK_PROBE pid once.
 */
int
fp_node_sample_request(struct fp_node *node, const struct fp_pid *pids,
		       const enum fp_ask *asks, size_t n, uint64_t *id);

/** The item lists (and pids) in a sample request of @asks: two per fully
 * asked pid, one per probe (@asks NULL: two each). */
size_t
fp_node_sample_lists(const enum fp_ask *asks, size_t n);

/**
 * Decode a whereis reply for @n names, name by name: found[i] tells
 * whether name i is registered, out[i] its pid if so.
 *
 * @return 0, or -EBADMSG (also when the list has other than @n elements).
 */
int
fp_node_decode_whereis(const struct fp_reply *reply, struct fp_pid *out,
		       bool *found, size_t n);

/* ---- FP_REQUEST_HELPER ------------------------------------------------ */

/** The helper's batches arrive as replies with this id (0: no helper). */
uint64_t
fp_node_helper_id(const struct fp_node *node);

/** The helper process, so that a selection can leave it out. @return
 * false when there is none. */
bool
fp_node_helper_pid(const struct fp_node *node, struct fp_pid *pid);

/** The helper's module on the node, e.g. "fpdh_0123456789abc"; "" when
 * none is loaded. */
const char *
fp_node_helper_module(const struct fp_node *node);

/**
 * Tell the helper what to sample: @pids, @rate samples/s each, probing
 * idle processes if @idle_reuse; nothing while @paused (it still sends a
 * batch, empty, every 250 ms). Replaces the last configuration.
 *
 * @return 0, -ENOTCONN without a helper, -ETIMEDOUT, -ECONNRESET or
 *         -ECANCELED.
 */
int
fp_node_helper_config(struct fp_node *node, const struct fp_pid *pids,
		      size_t n, double rate, bool idle_reuse, bool paused);

/** Ask the helper to sample @pids in full next time (the caller's
 * sampler could not take a probe of them). Returns as above. */
int
fp_node_helper_forget(struct fp_node *node, const struct fp_pid *pids,
		      size_t n);

/** Ask the helper to send what it has (a batch with last set) and stop;
 * it unloads its module. Returns as above. */
int
fp_node_helper_stop(struct fp_node *node);

/** A batch from the helper: the header, then its rows one by one. */
struct fp_batch {
	uint64_t sent_us;	/* the node's os:system_time when sent */
	uint64_t work_us;	/* the helper's time sampling and sending
				 * since its last batch */
	uint64_t skipped;	/* samples that fell due and were not taken */
	bool last;		/* the helper has stopped */
	size_t rows;
	/* private */
	const char *buf;
	size_t len;
	int index;
	size_t next;
};

/** One row: samples taken at one moment, as a sample request's reply. */
struct fp_batch_row {
	uint64_t time_us;	/* the node's os:system_time */
	size_t n;		/* pids and asks written */
	struct fp_reply results;	/* checked; for fp_sampler_decode() */
};

/**
 * Read the header of a helper batch (a reply with fp_node_helper_id()).
 * @b refers into @reply, valid as the reply.
 *
 * @return 0; -EPROTO when the helper reports that it failed (logged);
 *         -EBADMSG when the reply is no batch.
 */
int
fp_node_batch_open(const struct fp_reply *reply, struct fp_batch *b);

/**
 * The next row of @b: its pids and what was asked of each into @pids and
 * @asks (room for @max), the rest into @row.
 *
 * @return 1 with a row, 0 after the last, -EBADMSG for a malformed row
 *         or one of more than @max pids (the rows after it are lost).
 */
int
fp_node_batch_row(struct fp_batch *b, struct fp_batch_row *row,
		  struct fp_pid *pids, enum fp_ask *asks, size_t max);
