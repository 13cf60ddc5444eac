/*
 * flame_profd — the node: its settings, what the connect learns of it,
 * and the connect itself (the connection, the probes, the request path).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "conn.h"
#include "fp/log.h"
#include "node-private.h"
#include "path.h"
#include "request.h"
#include "util-mem.h"

int
fp_node_name_check(const char *name, const char **why)
{
	const char *at = strchr(name, '@');
	size_t alive_len;

	if (!at) {
		*why = "a node name needs a host part: name@host";
		return -EINVAL;
	}
	alive_len = (size_t)(at - name);
	if (alive_len == 0) {
		*why = "the name part before '@' is empty";
		return -EINVAL;
	}
	if (at[1] == '\0') {
		*why = "the host part after '@' is empty";
		return -EINVAL;
	}
	if (strchr(at + 1, '@')) {
		*why = "a node name has exactly one '@'";
		return -EINVAL;
	}
	if (strlen(name) >= MAXNODELEN || alive_len >= MAXATOMLEN - 1 ||
	    strlen(at + 1) > EI_MAXHOSTNAMELEN) {
		*why = "the node name is too long";
		return -EINVAL;
	}
	for (const char *p = name; p < at; p++) {
		unsigned char c = (unsigned char)*p;

		/* What epmd and erl accept for the alive part. */
		if (!(c == '_' || c == '-' || (c >= '0' && c <= '9') ||
		      (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c >= 0x80)) {
			*why = "the name part may only hold letters, digits, '_' and '-'";
			return -EINVAL;
		}
	}
	for (const char *p = at + 1; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c <= ' ' || c == '/' || c == '\'' || c == '"') {
			*why = "the host part holds a character no host name has";
			return -EINVAL;
		}
	}
	return 0;
}

struct fp_node *
fp_node_new(const char *target, const char *cookie)
{
	struct fp_node *node = xnew(struct fp_node);
	const char *at = strchr(target, '@');

	node->target = xstrdup(target);
	node->cookie = xstrdup(cookie);
	node->fd = -1;
	node->wordsize = 8;
	if (at) {
		snprintf(node->alive, sizeof(node->alive), "%.*s",
			 (int)(at - target), target);
		snprintf(node->host, sizeof(node->host), "%s", at + 1);
	}
	ei_x_new(&node->rx);
	ei_x_new(&node->tx);
	ei_x_new(&node->extra_items);
	return node;
}

enum fp_request_path
fp_node_request_path(const struct fp_node *node)
{
	return node->fd >= 0 ? node->path_now : node->path;
}

void
fp_node_set_request_path(struct fp_node *node, enum fp_request_path path)
{
	node->path = path;
}

void
fp_node_set_address(struct fp_node *node, const char *host, unsigned port)
{
	free(node->via_host);
	node->via_host = xstrdup(host);
	node->via_port = port;
}

void
fp_node_set_give_up(struct fp_node *node, bool (*give_up)(void *data),
		    void *data)
{
	node->give_up = give_up;
	node->give_up_data = data;
}

static void
free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static char **
copy_names(const char *const *names, size_t n)
{
	char **copy = n ? xzalloc(n * sizeof(*copy)) : NULL;

	for (size_t i = 0; i < n; i++)
		copy[i] = xstrdup(names[i]);
	return copy;
}

void
fp_node_set_extras(struct fp_node *node, const struct fp_extras *extras)
{
	free_names(node->keys, node->nkeys);
	free_names(node->logger_keys, node->nlogger_keys);
	node->keys = copy_names(extras->keys, extras->nkeys);
	node->nkeys = extras->nkeys;
	node->logger_keys = copy_names(extras->logger_keys, extras->nlogger_keys);
	node->nlogger_keys = extras->nlogger_keys;
	node->callers = extras->callers;
}

enum fp_label_source
fp_node_label_source(const struct fp_node *node)
{
	return node->label_source;
}

bool
fp_node_records_keys(const struct fp_node *node)
{
	return node->dict_keys &&
	       (node->nkeys || node->nlogger_keys || node->callers);
}

void
fp_node_destroy(struct fp_node *node)
{
	if (!node)
		return;
	fp_node_disconnect(node);
	ei_x_free(&node->rx);
	ei_x_free(&node->tx);
	explicit_bzero(node->cookie, strlen(node->cookie));
	explicit_bzero(&node->ec, sizeof(node->ec));
	free(node->cookie);
	free(node->target);
	free(node->via_host);
	free(node->scan_exprs);
	free(node->ic_exprs);
	free(node->sweep_exprs);
	free_names(node->keys, node->nkeys);
	free_names(node->logger_keys, node->nlogger_keys);
	ei_x_free(&node->extra_items);
	free(node);
}

int
fp_node_fd(const struct fp_node *node)
{
	return node->fd;
}

const char *
fp_node_name(const struct fp_node *node)
{
	return node_name_of(node);
}

const char *
fp_node_self_name(const struct fp_node *node)
{
	return node->self_name;
}

const char *
fp_node_otp_release(const struct fp_node *node)
{
	return node->otp_release;
}

struct fp_pid
fp_node_rex_pid(const struct fp_node *node)
{
	return node->rex;
}

unsigned
fp_node_wordsize(const struct fp_node *node)
{
	return node->wordsize;
}

unsigned
fp_node_schedulers(const struct fp_node *node)
{
	return node->schedulers ? node->schedulers : 1;
}

bool
fp_node_is_local(const struct fp_node *node)
{
	return node->local;
}

/* An OS pid is a decimal string well under this. */
#define OS_PID_TEXT_MAX 16

int
fp_node_os_pid(struct fp_node *node, unsigned timeout_ms, pid_t *os_pid,
	       uint64_t *us)
{
	struct fp_reply reply;
	char text[OS_PID_TEXT_MAX], *end;
	ei_x_buff args;
	int rc, index, type, size;
	long v;

	/* timer:tc(os, getpid, []): timed like the other node work the
	 * cost model counts */
	ei_x_new(&args);
	ei_x_encode_list_header(&args, 3);
	ei_x_encode_atom(&args, "os");
	ei_x_encode_atom(&args, "getpid");
	ei_x_encode_empty_list(&args);
	ei_x_encode_empty_list(&args);
	rc = node_call(node, "timer", "tc", &args, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	if (fp_reply_take_time(&reply, us) < 0) {
		rc = -EPROTO;
		goto out;
	}
	index = reply.index;
	if (ei_get_type(reply.buf, &index, &type, &size) < 0 ||
	    type != ERL_STRING_EXT || size < 1 || size >= OS_PID_TEXT_MAX ||
	    ei_decode_string(reply.buf, &index, text) < 0) {
		rc = -EPROTO;
		goto out;
	}
	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || *end || end == text || v <= 0 || v > INT_MAX) {
		rc = -EPROTO;
		goto out;
	}
	*os_pid = (pid_t)v;
out:
	ei_x_free(&args);
	return rc;
}

/* erlang:system_info(@what), checked */
/* Whether @s, the node's otp_release, is what a release says ("25",
 * "27.1", "29-rc1"): it is printed in log lines and the file header, and
 * a node that says anything else is not one to trust. */
static bool
release_text_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		if (!((*s >= '0' && *s <= '9') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= 'a' && *s <= 'z') || *s == '.' || *s == '-' ||
		      *s == '_'))
			return false;
	}
	return true;
}

static int
system_info(struct fp_node *node, ei_x_buff *args, const char *what,
	    unsigned timeout_ms, struct fp_reply *reply)
{
	args->index = 0;
	ei_x_encode_list_header(args, 1);
	ei_x_encode_atom(args, what);
	ei_x_encode_empty_list(args);
	return node_call(node, "erlang", "system_info", args, timeout_ms, reply);
}

/*
 * A feature probe, process_info(@rex, Item) with Item {dictionary, @key},
 * or @item when @key is NULL: 1 when the node takes the item, 0 when it
 * refuses it (the badrpc is the answer, not worth a warning), or a
 * negative errno.
 */
static int
probe_item(struct fp_node *node, ei_x_buff *args, const erlang_pid *rex,
	   const char *key, enum node_item item, unsigned timeout_ms)
{
	struct fp_reply reply;
	int rc;

	args->index = 0;
	ei_x_encode_list_header(args, 2);
	ei_x_encode_pid(args, rex);
	if (key)
		node_encode_dict_key(args, key);
	else
		ei_x_encode_atom(args, node_item_names[item].name);
	ei_x_encode_empty_list(args);
	node->probing = true;
	rc = node_call(node, "erlang", "process_info", args, timeout_ms, &reply);
	node->probing = false;
	if (rc == -EPROTO)
		return 0;
	return rc < 0 ? rc : 1;
}

static int
setup_calls(struct fp_node *node, unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff args;
	erlang_pid rex;
	long value;
	int rc, i, type, size;

	ei_x_new(&args);

	args.index = 0;
	ei_x_encode_list_header(&args, 1);
	ei_x_encode_atom(&args, "rex");
	ei_x_encode_empty_list(&args);
	rc = node_call(node, "erlang", "whereis", &args, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_decode_pid(reply.buf, &i, &rex) < 0) {
		rc = -EPROTO;
		goto out;
	}
	node->rex.num = rex.num;
	node->rex.serial = rex.serial;
	node->creation = rex.creation;
	/* A node reached through another host name (an alias, localhost,
	 * an address) still calls itself what it was started as, and takes
	 * a pid of any other node name for a remote one: every pid we send
	 * carries the name its own rex has. */
	if (strlen(rex.node) >= sizeof(node->name)) {
		rc = -EPROTO;
		goto out;
	}
	strcpy(node->name, rex.node);

	/* process_info(P, {dictionary, Key}) (OTP 26.2 and later) reads one
	 * key without copying the dictionary; older nodes refuse the item
	 * with badarg. rex is a gen_server: it has the key asked here. */
	rc = probe_item(node, &args, &rex, NODE_KEY_INITIAL_CALL, 0, timeout_ms);
	if (rc < 0)
		goto out;
	node->dict_keys = rc == 1;

	/* process_info(P, label) (OTP 27 and later) reads proc_lib's label;
	 * before, it is '$process_label' in the dictionary, readable alone
	 * where keys are. rex has none: the answer is undefined, not badarg.
	 * A node that reads no key (before 26.2) has neither: not asked. */
	node->label_source = FP_LABEL_NONE;
	if (node->dict_keys) {
		rc = probe_item(node, &args, &rex, NULL, NODE_ITEM_LABEL,
				timeout_ms);
		if (rc < 0)
			goto out;
		node->label_source = rc == 1 ? FP_LABEL_ITEM : FP_LABEL_DICT;
	}
	node_encode_extra_items(node);
	rc = node_initial_calls_prepare(node, timeout_ms);
	if (rc < 0)
		goto out;

	rc = system_info(node, &args, "wordsize", timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_decode_long(reply.buf, &i, &value) < 0 ||
	    (value != 4 && value != 8)) {
		rc = -EPROTO;
		goto out;
	}
	node->wordsize = (unsigned)value;

	rc = system_info(node, &args, "schedulers_online", timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_decode_long(reply.buf, &i, &value) < 0 || value < 1) {
		rc = -EPROTO;
		goto out;
	}
	node->schedulers = (unsigned)value;

	rc = system_info(node, &args, "otp_release", timeout_ms, &reply);
	if (rc < 0)
		goto out;
	i = reply.index;
	if (ei_get_type(reply.buf, &i, &type, &size) < 0 ||
	    type != ERL_STRING_EXT || size >= (int)sizeof(node->otp_release) ||
	    ei_decode_string(reply.buf, &i, node->otp_release) < 0 ||
	    !release_text_ok(node->otp_release)) {
		rc = -EPROTO;
		goto out;
	}
	rc = 0;
out:
	ei_x_free(&args);
	return rc;
}

static const struct node_path *
path_of(enum fp_request_path path)
{
	switch (path) {
	case FP_REQUEST_EVAL:
		return &node_path_eval;
	case FP_REQUEST_HELPER:
		return &node_path_helper;
	default:
		return &node_path_rex;
	}
}

int
fp_node_connect(struct fp_node *node, unsigned timeout_ms)
{
	int rc;

	rc = conn_open(node, timeout_ms);
	if (rc < 0)
		return rc;

	rc = setup_calls(node, timeout_ms);
	node->path_now = node->path;
	if (node->path == FP_REQUEST_HELPER && node->helper_refused)
		node->path_now = FP_REQUEST_REX;
	if (rc == 0) {
		/* from here the path hears of exits and replies, and of the
		 * disconnect if its start fails half-way */
		node->ops = path_of(node->path_now);
		if (node->ops->start)
			rc = node->ops->start(node, timeout_ms);
	}
	if (rc == -ENOEXEC) {
		/* the node will not run this path: the stock one needs
		 * nothing on it (the path said why) */
		node->ops->stop(node);
		node->helper_refused = true;
		node->path_now = FP_REQUEST_REX;
		node->ops = &node_path_rex;
		rc = 0;
	}
	if (rc < 0) {
		fp_node_disconnect(node);
		return rc == -ETIMEDOUT || rc == -ECONNRESET ||
		       rc == -ECANCELED ? rc : -EPROTO;
	}
	return 0;
}
