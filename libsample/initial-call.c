/*
 * flame_profd — initial calls: what proc_lib said a process was started
 * as, asked once in a process's life and remembered (struct ic_memo).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etf.h"
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

/* proc_lib's {M, F, Args}, or a dictionary read's
 * {{dictionary, '$initial_call'}, {M, F, Arity} | undefined}: 1 with the
 * call, 0 for an answer without one (false, undefined), or -EBADMSG. */
static int
decode_initial_call(const char *buf, int *index, char *m, char *f,
		    uint32_t *arity)
{
	int type, size, start = *index, n;

	if (ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	if (is_atom_type(type))
		return etf_decode_atom(buf, index, m) < 0 ? -EBADMSG : 0;
	if (ei_decode_tuple_header(buf, index, &n) < 0)
		return -EBADMSG;
	if (n == 2) {
		/* the key, then the value */
		if (etf_skip_term(buf, index) < 0)
			return -EBADMSG;
		return decode_initial_call(buf, index, m, f, arity);
	}
	*index = start;
	return sampler_decode_mfa(buf, index, m, f, arity) < 0 ? -EBADMSG : 1;
}

int
fp_sampler_initial_calls(struct fp_sampler *s, const struct fp_reply *reply,
			 const struct fp_pid *pids, size_t n)
{
	const char *buf = reply->buf;
	int index = reply->index, count, rc;
	char m[MAXATOMLEN_UTF8], f[MAXATOMLEN_UTF8];

	if (reply->badrpc || etf_reply_check(reply) < 0 ||
	    ei_decode_list_header(buf, &index, &count) < 0 || (size_t)count != n)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		struct proc_state *st;
		struct ic_memo *memo;
		uint32_t arity;
		bool created;

		rc = decode_initial_call(buf, &index, m, f, &arity);
		if (rc < 0)
			return -EBADMSG;
		if (rc == 0)
			continue;
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

