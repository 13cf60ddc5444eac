/*
 * flame_profd — internals shared by the libsample files that talk to ei.
 */
#pragma once

#include <ei.h>
#include <stdbool.h>

#include "fp/node.h"

/* The tag in the third word of our references: lets us tell our own
 * replies from anything else a confused peer might send. */
#define REF_MAGIC 0x66707264u	/* "fprd" */
/* The same for requests whose reply the caller checks as it decodes
 * (sample batches: see fp_reply.checked). */
#define REF_MAGIC_UNCHECKED 0x66707275u	/* "fpru" */

struct fp_node {
	char *target;		/* the name we were given */
	char name[MAXNODELEN + 1];	/* the name the node answers to */
	char *cookie;
	char alive[MAXATOMLEN];
	char host[EI_MAXHOSTNAMELEN + 1];

	ei_cnode ec;
	int fd;
	char self_name[MAXNODELEN + 1];

	uint64_t next_id;
	ei_x_buff rx;
	ei_x_buff tx;

	char *via_host;		/* --connect: skip epmd */
	unsigned via_port;

	/* fp_node_set_give_up(): asked between the slices of every wait */
	bool (*give_up)(void *data);
	void *give_up_data;
	bool cancelled;		/* an ei call's I/O was given up ... */
	bool broken;		/* ... and may have cut a message in two */

	char otp_release[16];
	unsigned wordsize;
	unsigned schedulers;
	bool local;		/* the node is on this host (fp_node_is_local) */
	struct fp_pid rex;
	unsigned creation;	/* of the target, for the pids we send */

	/* FP_REQUEST_EVAL: sampling processes erl_eval started on the node */
	enum fp_request_path path;	/* asked for */
	enum fp_request_path path_now;	/* ... in use on this connection */
	bool helper_refused;		/* the node would not load the helper */
	erlang_pid samplers[FP_EVAL_SAMPLERS];
	uint64_t sampler_busy[FP_EVAL_SAMPLERS];	/* request id, 0: free */
	unsigned nsamplers, next_sampler;
	unsigned connects;

	bool depth_attached;	/* the node's janitor holds our depth */
	bool dict_keys;		/* process_info(P, {dictionary, Key}) works */
	bool probing;		/* a badrpc answers a feature probe: no warning */
	enum fp_label_source label_source;	/* probed at connect */
	/* fp_node_set_extras(), and the items of the signalled list they
	 * take on this connection, encoded once per connect */
	char **keys, **logger_keys;
	size_t nkeys, nlogger_keys;
	bool callers;
	ei_x_buff extra_items;
	long nextra_items;

	/* scan.c: the selection scan, parsed by the node */
	char *scan_exprs;
	size_t scan_len;
	bool scan_iter;		/* ... walking the table with an iterator */
	unsigned scan_connects;	/* ... for this connection (connects) */

	/* FP_REQUEST_HELPER: the module loaded for this connection (helper.c) */
	char helper_mod[MAXATOMLEN];
	erlang_pid helper;
	bool have_helper;	/* the helper process runs */
	bool helper_loaded;	/* ... its module is loaded */
	bool helper_stopping;	/* ... asked to stop */
	bool helper_exited;	/* ... ended unasked: unload its module */
	uint64_t helper_id;	/* the id its batches come under */
};

/* The helper module's compiled code (helper-beam.c, generated). */
extern const unsigned char fp_helper_beam[];
extern const size_t fp_helper_beam_len;

/* Send mod:fun(args...) through rex and wait for its checked reply:
 * 0, -EPROTO for {badrpc, _}, or as fp_node_receive(). */
int
node_call(struct fp_node *node, const char *mod, const char *fun,
	  const ei_x_buff *args, unsigned timeout_ms, struct fp_reply *reply);

/* A reference of ours carrying @id (checked replies unless @unchecked). */
void
node_encode_ref(struct fp_node *node, ei_x_buff *x, uint64_t id, bool unchecked);

/* The same process: numbers, creation and node. */
bool
node_same_pid(const erlang_pid *a, const erlang_pid *b);

/* A pid of the target from its local numbers. */
void
node_encode_local_pid(struct fp_node *node, ei_x_buff *x, struct fp_pid pid);

/* A list of such pids. */
void
node_encode_pid_list(struct fp_node *node, ei_x_buff *x,
		     const struct fp_pid *pids, size_t n);

/* {Instant, Signalled, Probe}: the item lists a sample asks (node.c). */
void
node_encode_item_sets(const struct fp_node *node, ei_x_buff *x);

/* helper.c: load and start the helper at connect (0, -ENOEXEC when the
 * node would not load the module, or as node_call()), stop it at
 * disconnect. */
int
node_helper_start(struct fp_node *node, unsigned timeout_ms);

void
node_helper_stop(struct fp_node *node);

/* True (and logs why) when an exit signal came from the helper. */
bool
node_helper_exited(struct fp_node *node, const erlang_pid *from);

/*
 * Rename module @from to @to (as long) in a .beam image, in place: the
 * module's atom, the first of the atom table. 0, or -EINVAL when the
 * image is no BEAM file or its module is not @from.
 */
int
node_beam_rename(unsigned char *beam, size_t len, const char *from,
		 const char *to);

/* Room for @more bytes past x->index, the buffer doubled if it grows:
 * call before a long run of encodes into one buffer. */
void
node_x_reserve(ei_x_buff *x, size_t more);

/* The rpc message of mod:fun(args...) (args an encoded list) into @x,
 * replacing what it held, under reference @id; @timed wraps it in
 * timer:tc/3. */
void
node_rpc_encode(struct fp_node *node, ei_x_buff *x, const char *mod,
		const char *fun, const ei_x_buff *args, uint64_t id,
		bool unchecked, bool timed);

/* After an ei call on the connection failed with @err: if a wait inside
 * it was given up, it may have cut a message in two and the stream is of
 * no more use: closed, -ECANCELED. Otherwise @err. */
int
node_io_failed(struct fp_node *node, int err);

/* Send an rpc of mod:fun(args...) with args an encoded list. */
int
node_rpc_send(struct fp_node *node, const char *mod, const char *fun,
	      const ei_x_buff *args, uint64_t *id);

/* The same wrapped in timer:tc/3: the reply is {Microseconds, Result}
 * (fp_reply_take_time()); @unchecked as node_encode_ref(). */
int
node_rpc_send_timed(struct fp_node *node, const char *mod, const char *fun,
		    const ei_x_buff *args, uint64_t *id, bool unchecked);

/* eval.c: Erlang source the node parses (once per connection) into
 * @parsed, then runs with erl_eval:exprs(Parsed, Bindings) — stock code
 * only. @bindings is an encoded list of {'Var', Value}, or NULL. The
 * reply is {value, Value, Bindings}: node_reply_eval_value() moves a
 * reply (after fp_reply_take_time(), if timed) to Value; node_eval_call()
 * waits and does that. Errors as node_call(). */
int
node_expr_parse(struct fp_node *node, const char *source, ei_x_buff *parsed,
		unsigned timeout_ms);

int
node_eval_send(struct fp_node *node, const ei_x_buff *parsed,
	       const ei_x_buff *bindings, bool timed, uint64_t *id);

int
node_eval_call(struct fp_node *node, const ei_x_buff *parsed,
	       const ei_x_buff *bindings, unsigned timeout_ms,
	       struct fp_reply *reply);

int
node_reply_eval_value(struct fp_reply *reply);

/* {Tag, Term, ...}: where Term's bytes start and end in a checked reply;
 * -EPROTO when the reply is not such a tuple. */
int
node_reply_element(const struct fp_reply *reply, const char *tag, int *start,
		   int *end);

/* Decode a pid sent by the node into its local numbers. */
int
node_decode_pid(const char *buf, int *index, struct fp_pid *pid);

/* Decode an atom as UTF-8 into dst (at least MAXATOMLEN_UTF8 bytes). */
int
node_decode_atom(const char *buf, int *index, char *dst);

/* Skip any term. */
int
node_skip_term(const char *buf, int *index);

/* Decode an integer term (small, int or fitting bignum) into *value. */
int
node_decode_int(const char *buf, int *index, int64_t *value);

/*
 * Walk the term at buf[start..len) without trusting its lengths: 0 if it
 * is one well-formed term that ends exactly at len (funs, compressed
 * terms and nesting deeper than 256 are refused), -EBADMSG otherwise.
 */
int
node_term_check(const char *buf, size_t len, size_t start);

/* The same for one term at *pos that need not end the buffer: 0 and *pos
 * past it, or -EBADMSG. */
int
node_term_skip(const char *buf, size_t len, size_t *pos);

/*
 * Recognise a reply to one of our requests: 1 (reply filled), 0 (a
 * well-formed message that is not ours), -EBADMSG (malformed). Every
 * message is checked (node_term_check) except the result of a request
 * sent unchecked, which is left to its decoder (reply->checked false).
 */
int
node_parse_reply(const char *buf, size_t len, struct fp_reply *reply);

/* 0 if the result of @reply is checked or passes the check now. Every
 * decoder that hands a reply to ei calls this first. */
int
node_reply_check(const struct fp_reply *reply);
