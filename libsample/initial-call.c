/*
 * flame_profd — initial calls: what proc_lib said a process was started
 * as, asked once in a process's life and remembered (struct ic_memo).
 * The question (fp_node_initial_call_request()) checks the answer's shape
 * on the node; one that still does not decode is its process's alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etf.h"
#include "eval.h"
#include "fp/log.h"
#include "sampler-private.h"
#include "util-mem.h"

void
sampler_memo_clear(struct fp_sampler *s)
{
	size_t it = 0;
	uint64_t key;
	void *v;

	while (pidmap_next(&s->ic_memo, &it, &key, &v)) {
		struct ic_memo *m = v;

		free(m->module);
		free(m->function);
	}
	pidmap_clear(&s->ic_memo);
}

bool
fp_sampler_wants_initial_call(const struct fp_sampler *s, struct fp_pid pid)
{
	const struct proc_state *st = pidmap_find(&s->procs, fp_pid_key(pid));

	return !st || !st->ic_module;
}

bool
fp_sampler_wants_proc_lib_call(const struct fp_sampler *s, struct fp_pid pid,
			       int64_t max_memory)
{
	const struct proc_state *st = pidmap_find(&s->procs, fp_pid_key(pid));

	/* proc_lib only knows better for what it started itself */
	if (!st || !st->have_prev || !st->ic_module || st->ic_from_proc_lib ||
	    strcmp(st->ic_module, "proc_lib") != 0 ||
	    strncmp(st->ic_function, "init_p", 6) != 0 ||
	    pidmap_find(&s->ic_memo, fp_pid_key(pid)))
		return false;
	return max_memory < 0 || st->prev[FP_METRIC_MEMORY] <= max_memory;
}

/* Room for one more memo: past IC_MEMO_MAX, forget the processes that
 * are not in the set. */
static void
memo_make_room(struct fp_sampler *s)
{
	size_t it = 0;
	uint64_t key;
	void *v;

	uint64_t *gone;
	size_t n = 0;

	if (s->ic_memo.count < IC_MEMO_MAX)
		return;
	gone = xzalloc(s->ic_memo.count * sizeof(*gone));
	while (pidmap_next(&s->ic_memo, &it, &key, &v)) {
		struct ic_memo *m = v;

		if (pidmap_find(&s->procs, key))
			continue;
		free(m->module);
		free(m->function);
		gone[n++] = key;
	}
	/* removing moves entries: not while walking */
	for (size_t i = 0; i < n; i++)
		pidmap_remove(&s->ic_memo, gone[i]);
	free(gone);
	if (s->ic_memo.count >= IC_MEMO_MAX)
		sampler_memo_clear(s);
}

void
fp_sampler_initial_calls_asked(struct fp_sampler *s, const struct fp_pid *pids,
			       size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool created;
		struct ic_memo *m;

		memo_make_room(s);
		m = pidmap_insert(&s->ic_memo, fp_pid_key(pids[i]), &created);
		if (created)
			m->module = m->function = NULL;
	}
}

void
sampler_set_initial_call(struct proc_state *st, const char *m, const char *f,
			 uint32_t arity)
{
	free(st->ic_module);
	free(st->ic_function);
	st->ic_module = xstrdup(m);
	st->ic_function = xstrdup(f);
	st->ic_arity = arity;
}

int
sampler_decode_mfa(const char *buf, int *index, char *m, char *f,
		   uint32_t *arity)
{
	int n, type, size;
	int64_t a;

	if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 3 ||
	    etf_decode_atom(buf, index, m) < 0 ||
	    etf_decode_atom(buf, index, f) < 0 ||
	    ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	if (type == ERL_LIST_EXT || type == ERL_NIL_EXT || type == ERL_STRING_EXT) {
		*arity = (uint32_t)size;
		return etf_skip_term(buf, index);
	}
	if (etf_decode_int(buf, index, &a) < 0 || a < 0 || a > 255)
		return -EBADMSG;
	*arity = (uint32_t)a;
	return 0;
}

/* One answer of the initial-call read: {M, F, Arity}, or an atom for a
 * process without one (undefined, a dead one) or whose '$initial_call' is
 * not such a call (odd). 1 with the call, 0 for an atom, or -EBADMSG. */
static int
decode_initial_call(const char *buf, int *index, char *m, char *f,
		    uint32_t *arity)
{
	int type, size;

	if (ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	if (is_atom_type(type))
		return etf_decode_atom(buf, index, m) < 0 ? -EBADMSG : 0;
	return sampler_decode_mfa(buf, index, m, f, arity) < 0 ? -EBADMSG : 1;
}

int
fp_sampler_initial_calls(struct fp_sampler *s, const struct fp_reply *reply,
			 const struct fp_pid *pids, size_t n)
{
	struct fp_reply value = *reply;
	const char *buf = reply->buf;
	int index, count, rc;
	char m[MAXATOMLEN_UTF8], f[MAXATOMLEN_UTF8];

	if (node_reply_eval_value(&value) < 0)
		return -EBADMSG;
	index = value.index;
	if (ei_decode_list_header(buf, &index, &count) < 0 || (size_t)count != n)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		struct proc_state *st;
		struct ic_memo *memo;
		uint32_t arity;
		bool created;
		int at = index;

		/* an answer this decoder does not take is that process's
		 * alone: the ones after it keep theirs */
		rc = decode_initial_call(buf, &index, m, f, &arity);
		if (rc < 0) {
			index = at;
			if (etf_skip_term(buf, &index) < 0)
				return -EBADMSG;
			fp_log(FP_LOG_DEBUG, "initial call of <0.%u.%u> not taken",
			       pids[i].num, pids[i].serial);
			continue;
		}
		if (rc == 0) {
			if (strcmp(m, "odd") == 0)
				fp_log(FP_LOG_DEBUG, "'$initial_call' of <0.%u.%u> is no "
				       "{Module, Function, Arity}: its own initial call kept",
				       pids[i].num, pids[i].serial);
			continue;
		}
		memo_make_room(s);
		memo = pidmap_insert(&s->ic_memo, fp_pid_key(pids[i]), &created);
		if (!created) {
			free(memo->module);
			free(memo->function);
		}
		memo->module = xstrdup(m);
		memo->function = xstrdup(f);
		memo->arity = arity;
		st = pidmap_find(&s->procs, fp_pid_key(pids[i]));
		if (st) {
			sampler_set_initial_call(st, m, f, arity);
			st->ic_from_proc_lib = true;
		}
	}
	return 0;
}
