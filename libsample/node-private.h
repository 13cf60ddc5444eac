/*
 * flame_profd — the node's state, shared by the libsample files that talk
 * to it. What each file offers the others is in its own header: etf.h
 * (reading terms), conn.h (the connection), request.h (what we ask),
 * eval.h (erl_eval on the node), path.h (the request paths).
 */
#pragma once

#include <ei.h>
#include <stdbool.h>

#include "fp/node.h"

struct node_path;

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

	enum fp_request_path path;	/* asked for */
	enum fp_request_path path_now;	/* ... in use on this connection */
	const struct node_path *ops;	/* ... its calls (path.h); NULL
					 * while no path runs */
	/* FP_REQUEST_EVAL: sampling processes erl_eval started on the node */
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

	/* request.c: the initial-call read, parsed by the node */
	char *ic_exprs;
	size_t ic_len;

	/* scan.c: the selection scan, parsed by the node */
	char *scan_exprs;
	size_t scan_len;
	char *sweep_exprs;	/* ... and the sweep's */
	size_t sweep_len;
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

	/* watcher.c: the id the watcher's messages come under (0: none),
	 * and the watcher */
	uint64_t watch_id;
	erlang_pid watcher;
};

/* watcher.c: an exit signal from the watcher (said, and its messages
 * no longer expected)? */
bool
node_watcher_exited(struct fp_node *node, const erlang_pid *from);

/* The name the node answers to, once known; the one we were given before
 * (fp_node_name()). */
static inline const char *
node_name_of(const struct fp_node *node)
{
	return node->name[0] ? node->name : node->target;
}
