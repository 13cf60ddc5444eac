/*
 * flame_profd — the aggregate of --trace (trace-agg.h).
 *
 * The stack rules are those of the traced code as call trace shows it:
 * call pushes its function, except one already on the stack, which cuts
 * the stack back to it (a tail call or a loop re-entering it, where no
 * return_to comes); return_to cuts back to the function returned to,
 * however many frames an exception or a chain of tail calls skipped,
 * and a function not on the stack takes the place of the innermost
 * frame, the one that returned: it is a caller no call event showed (a
 * function with no pattern, as lists:foldl/3 running a fun, or one the
 * trace started in), and the frames under it stay; in with an empty
 * stack starts it at the function scheduled in. The first event of a process only sets its clock: the
 * time before it belongs to no known stack.
 *
 * Following (trace_agg_follow()): a process that is no target came into
 * the trace by inheriting its flags on spawn, so its work is the
 * request's; its stacks get the follow frame as their root, which names
 * the request in every reader, and with one target they are charged to
 * the target's pid, so that many short Tasks add up to whole units
 * instead of each rounding to none. Such processes are bounded: past
 * FP_TRACE_PROCS_MAX a new process's events are left out (and counted).
 * A server (trace_agg_server()) is traced whole, but only its work on
 * the targets' calls is theirs: the tracer's pattern on the marker
 * function (gen_server:try_handle_call/4) lets its call through only
 * for a call from a target, so the server's time and calls count from
 * that call until the server calls or returns to one of the frames
 * that were below it (its loop takes the next message), and nothing
 * else of it does.
 *
 * Calls (trace_agg_calls()): a process counts only from a call's
 * enter to its leave, and its stacks start with the call's root frame,
 * then the function called; depth trimming keeps the root. A return_to
 * from the function called to its caller leaves the stack as it is: the
 * call's leave comes next, and the caller is no part of the call. A
 * process is kept from its enter to its leave only, so FP_TRACE_PROCS_MAX
 * bounds the calls in progress at once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace-agg.h"
#include "util-buf.h"
#include "util-hash.h"
#include "util-mem.h"

struct frame {
	char *module;
	char *function;
	uint32_t arity;
	uint64_t hash;
};

/* Processes whose stacks are kept, FP_TRACE_PROCS_MAX (--trace-call:
 * processes inside a call at once, a slot freed at its call's end): a
 * traced process that spawns thousands must not make every event a
 * long scan. */
/* Frames under a server's marker that end its span: gen_server's own
 * few (handle_msg, loop, proc_lib's) are all within this. */
#define SPAN_BELOW 8u

struct proc {
	struct fp_pid pid;
	bool on;
	bool followed;
	bool server;
	bool span;			/* a server, working for a target */
	bool in_call;			/* --trace-call: between enter and leave */
	uint64_t call;			/* ... its number */
	uint64_t call_time;		/* ... its time so far */
	uint32_t *touched;		/* ... the entries it charged */
	size_t ntouched, touched_cap;
	uint32_t nbelow;
	uint32_t below[SPAN_BELOW];	/* frames under the marker */
	int64_t t0;
	uint32_t n;
	uint32_t stack[FP_TRACE_DEPTH_MAX];	/* root first */
};

/* key: pid.num, pid.serial, on | followed << 1, the call's number (two
 * words, high first; 0 but with trace_agg_calls()), then the frames root
 * first */
#define KEY_HEAD 5u

struct entry {
	uint32_t *key;
	uint32_t keylen;
	uint64_t hash;
	uint64_t time;
	uint64_t calls;
	uint64_t call;			/* --trace-call: the last call that
					 * charged it */
	bool done;			/* ... and that call has ended */
};

/* A stack's remainder at its call's end, @i its place in the call's
 * touched list */
struct rem {
	uint64_t rem;
	size_t i;
};

struct trace_agg {
	unsigned depth;
	uint64_t unit;
	struct frame *frames;
	uint32_t nframes, frames_cap;
	uint32_t *fidx;			/* open addressing, UINT32_MAX empty */
	uint32_t fidx_cap;
	struct proc *procs;
	uint32_t nprocs, procs_cap;
	uint32_t last;			/* the process of the last event */
	struct fp_pid *targets;
	uint32_t ntargets, targets_cap;
	uint32_t follow;		/* root frame of followed processes */
	struct fp_pid *servers;
	uint32_t nservers, servers_cap;
	uint32_t marker;		/* a server works for the request */
	uint64_t unkept;		/* events of processes past the cap */
	bool calls;			/* --trace-call */
	uint32_t root;			/* ... the frame that stands for a
					 * call's root, named at the flush */
	char root_name[24];
	uint64_t begun, ended;		/* calls */
	struct rem *rem;		/* call_round()'s remainders */
	size_t rem_cap;
	struct entry *entries;
	uint32_t nentries, entries_cap;
	uint32_t ndone;			/* entries of ended calls */
	uint32_t *eidx;
	uint32_t eidx_cap;
	struct fp_frame out[FP_TRACE_DEPTH_MAX + 1];
};

static uint32_t *
index_new(uint32_t cap)
{
	uint32_t *idx = xzalloc(cap * sizeof(*idx));

	memset(idx, 0xff, cap * sizeof(*idx));
	return idx;
}

struct trace_agg *
trace_agg_new(unsigned depth, uint64_t unit)
{
	struct trace_agg *a = xzalloc(sizeof(*a));

	a->depth = depth < 1 ? 1 : depth > FP_TRACE_DEPTH_MAX ?
		   FP_TRACE_DEPTH_MAX : depth;
	a->unit = unit ? unit : 1;
	a->follow = TRACE_NO_FRAME;
	a->marker = TRACE_NO_FRAME;
	a->fidx_cap = a->eidx_cap = 64;
	a->fidx = index_new(a->fidx_cap);
	a->eidx = index_new(a->eidx_cap);
	return a;
}

void
trace_agg_destroy(struct trace_agg *a)
{
	if (!a)
		return;
	for (uint32_t i = 0; i < a->nframes; i++) {
		free(a->frames[i].module);
		free(a->frames[i].function);
	}
	for (uint32_t i = 0; i < a->nentries; i++)
		free(a->entries[i].key);
	for (uint32_t i = 0; i < a->nprocs; i++)
		free(a->procs[i].touched);
	free(a->frames);
	free(a->fidx);
	free(a->procs);
	free(a->targets);
	free(a->servers);
	free(a->entries);
	free(a->eidx);
	free(a->rem);
	free(a);
}

static uint64_t
frame_hash(const char *module, const char *function, uint32_t arity)
{
	uint64_t h = fnv1a_str(FNV1A_BASIS, module);

	h = fnv1a_update(h, ":", 1);
	h = fnv1a_str(h, function);
	return fnv1a_update(h, &arity, sizeof(arity));
}

/*
 * Make *@idx an open-addressed index of @c slots over @n items, the hash
 * of item i at @hashes + i * @stride (frames and entries keep theirs in
 * the item).
 */
static void
index_build(uint32_t **idx, uint32_t *cap, uint32_t c, const void *hashes,
	    size_t stride, uint32_t n)
{
	free(*idx);
	*idx = index_new(c);
	*cap = c;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t h;
		uint32_t j;

		memcpy(&h, (const char *)hashes + i * stride, sizeof(h));
		for (j = (uint32_t)h & (c - 1); (*idx)[j] != UINT32_MAX;
		     j = (j + 1) & (c - 1))
			;
		(*idx)[j] = i;
	}
}

/* Double the index *@idx of *@cap slots (index_build()). */
static void
index_grow(uint32_t **idx, uint32_t *cap, const void *hashes, size_t stride,
	   uint32_t n)
{
	index_build(idx, cap, *cap * 2, hashes, stride, n);
}

uint32_t
trace_agg_frame(struct trace_agg *a, const char *module, const char *function,
		uint32_t arity)
{
	uint64_t h = frame_hash(module, function, arity);
	uint32_t j = (uint32_t)h & (a->fidx_cap - 1);
	struct frame *f;

	for (; a->fidx[j] != UINT32_MAX; j = (j + 1) & (a->fidx_cap - 1)) {
		f = &a->frames[a->fidx[j]];
		if (f->hash == h && f->arity == arity &&
		    strcmp(f->module, module) == 0 &&
		    strcmp(f->function, function) == 0)
			return a->fidx[j];
	}
	if (a->nframes == a->frames_cap) {
		a->frames_cap = a->frames_cap ? a->frames_cap * 2 : 64;
		a->frames = xrealloc(a->frames,
				     a->frames_cap * sizeof(*a->frames));
	}
	a->frames[a->nframes] = (struct frame){
		.module = xstrdup(module),
		.function = xstrdup(function),
		.arity = arity,
		.hash = h,
	};
	a->fidx[j] = a->nframes;
	if (++a->nframes * 2 > a->fidx_cap)
		index_grow(&a->fidx, &a->fidx_cap, &a->frames[0].hash,
			   sizeof(*a->frames), a->nframes);
	return a->nframes - 1;
}

static bool
pid_eq(const struct fp_pid *x, const struct fp_pid *y)
{
	return x->num == y->num && x->serial == y->serial;
}

static struct proc *
proc_find(struct trace_agg *a, const struct fp_pid *pid)
{
	/* events come in runs of one process: try the last one first; the
	 * processes are capped, so a scan is enough */
	if (a->last < a->nprocs && pid_eq(&a->procs[a->last].pid, pid))
		return &a->procs[a->last];
	for (uint32_t i = 0; i < a->nprocs; i++)
		if (pid_eq(&a->procs[i].pid, pid)) {
			a->last = i;
			return &a->procs[i];
		}
	return NULL;
}

void
trace_agg_target(struct trace_agg *a, const struct fp_pid *pid)
{
	if (a->ntargets == a->targets_cap) {
		a->targets_cap = a->targets_cap ? a->targets_cap * 2 : 4;
		a->targets = xrealloc(a->targets,
				      a->targets_cap * sizeof(*a->targets));
	}
	a->targets[a->ntargets++] = *pid;
}

void
trace_agg_server(struct trace_agg *a, const struct fp_pid *pid,
		 uint32_t marker)
{
	if (a->nservers == a->servers_cap) {
		a->servers_cap = a->servers_cap ? a->servers_cap * 2 : 4;
		a->servers = xrealloc(a->servers,
				      a->servers_cap * sizeof(*a->servers));
	}
	a->servers[a->nservers++] = *pid;
	a->marker = marker < a->nframes ? marker : TRACE_NO_FRAME;
}

void
trace_agg_follow(struct trace_agg *a, uint32_t root)
{
	a->follow = root < a->nframes ? root : TRACE_NO_FRAME;
}

void
trace_agg_calls(struct trace_agg *a)
{
	a->calls = true;
	/* one frame for every call's root, the call's number in the key: a
	 * frame of each call's own would be kept for the aggregate's life */
	a->root = trace_agg_frame(a, FP_TRACE_CALL_MODULE, "", 0);
	/* the root and the function called */
	if (a->depth < 2)
		a->depth = 2;
}

void
trace_agg_call_counts(const struct trace_agg *a, uint64_t *begun,
		      uint64_t *ended)
{
	*begun = a->begun;
	*ended = a->ended;
}

uint32_t
trace_agg_stacks(const struct trace_agg *a)
{
	return a->nentries;
}

uint64_t
trace_agg_unkept(const struct trace_agg *a)
{
	return a->unkept;
}

static bool
pid_in(const struct fp_pid *pids, uint32_t n, const struct fp_pid *pid)
{
	for (uint32_t i = 0; i < n; i++)
		if (pid_eq(&pids[i], pid))
			return true;
	return false;
}

/* A process that is no server always works for the trace; a server
 * only while it handles a target's call. */
static bool
counts(const struct proc *p)
{
	return !p->server || p->span;
}

/* A server's span: it starts at the marker's call, the frames under
 * it kept, and ends at a call of or return to one of those. */
static void
span_event(struct trace_agg *a, struct proc *p, enum trace_ev ev,
	   uint32_t frame)
{
	if (ev != TRACE_EV_CALL && ev != TRACE_EV_RETURN_TO)
		return;
	if (ev == TRACE_EV_CALL && frame == a->marker) {
		uint32_t under = p->n > 0 ? p->n - 1 : 0;
		uint32_t from = under > SPAN_BELOW ? under - SPAN_BELOW : 0;

		p->nbelow = under - from;
		memcpy(p->below, p->stack + from, p->nbelow * sizeof(*p->below));
		p->span = true;
		return;
	}
	for (uint32_t i = 0; p->span && i < p->nbelow; i++)
		if (p->below[i] == frame)
			p->span = false;
}

/* A call's entries, for its rounding at the leave (call_round()) */
static void
touch(struct trace_agg *a, struct proc *p, uint32_t idx, uint64_t time)
{
	struct entry *e = &a->entries[idx];

	if (!a->calls || !p->in_call)
		return;
	p->call_time += time;
	if (e->call == p->call)
		return;
	e->call = p->call;
	FP_GROW(p->touched, p->touched_cap, p->ntouched + 1);
	p->touched[p->ntouched++] = idx;
}

/* Charge @time and @calls to @p's stack as it is, on or off a scheduler. */
static void
add(struct trace_agg *a, struct proc *p, bool on, uint64_t time,
    uint64_t calls)
{
	uint32_t key[KEY_HEAD + FP_TRACE_DEPTH_MAX];
	uint32_t keylen = KEY_HEAD + p->n, j;
	struct entry *e;
	uint64_t h;

	/* a spawned process of the one target is charged as the target:
	 * a Task's 50 us would be below a unit under its own pid */
	if (p->followed && !p->server && a->ntargets == 1) {
		key[0] = a->targets[0].num;
		key[1] = a->targets[0].serial;
	} else {
		key[0] = p->pid.num;
		key[1] = p->pid.serial;
	}
	key[2] = (uint32_t)on | (uint32_t)p->followed << 1;
	key[3] = (uint32_t)(p->call >> 32);
	key[4] = (uint32_t)p->call;
	memcpy(key + KEY_HEAD, p->stack, p->n * sizeof(*key));
	h = hash_bytes(key, keylen * sizeof(*key));
	for (j = (uint32_t)h & (a->eidx_cap - 1); a->eidx[j] != UINT32_MAX;
	     j = (j + 1) & (a->eidx_cap - 1)) {
		e = &a->entries[a->eidx[j]];
		if (e->hash == h && e->keylen == keylen &&
		    memcmp(e->key, key, keylen * sizeof(*key)) == 0) {
			e->time += time;
			e->calls += calls;
			touch(a, p, a->eidx[j], time);
			return;
		}
	}
	if (a->nentries == a->entries_cap) {
		a->entries_cap = a->entries_cap ? a->entries_cap * 2 : 64;
		a->entries = xrealloc(a->entries,
				      a->entries_cap * sizeof(*a->entries));
	}
	e = &a->entries[a->nentries];
	*e = (struct entry){
		.key = xzalloc(keylen * sizeof(*key)),
		.keylen = keylen,
		.hash = h,
		.time = time,
		.calls = calls,
	};
	memcpy(e->key, key, keylen * sizeof(*key));
	a->eidx[j] = a->nentries;
	if (++a->nentries * 2 > a->eidx_cap)
		index_grow(&a->eidx, &a->eidx_cap, &a->entries[0].hash,
			   sizeof(*a->entries), a->nentries);
	touch(a, p, a->nentries - 1, time);
}

/* Largest remainder first; of equal ones, the stack charged first. */
static int
rem_cmp(const void *x, const void *y)
{
	const struct rem *r = x, *q = y;

	if (r->rem != q->rem)
		return r->rem > q->rem ? -1 : 1;
	return r->i < q->i ? -1 : r->i > q->i;
}

/*
 * A call has ended: what its stacks still hold below a unit is rounded
 * as one, the call's total to the nearest unit (at least one for a call
 * shorter than a unit, so that every call shows), handed to the stacks
 * with the largest remainders. A call of 20 µs spread over ten stacks
 * would otherwise round to nothing in each.
 */
static void
call_round(struct trace_agg *a, struct proc *p)
{
	uint64_t sum = 0, want;

	FP_GROW(a->rem, a->rem_cap, p->ntouched);
	for (size_t i = 0; i < p->ntouched; i++) {
		struct entry *e = &a->entries[p->touched[i]];

		a->rem[i] = (struct rem){ .rem = e->time % a->unit, .i = i };
		sum += a->rem[i].rem;
		e->time -= a->rem[i].rem;
		e->done = true;
	}
	a->ndone += (uint32_t)p->ntouched;
	want = (sum + a->unit / 2) / a->unit;
	if (want == 0 && p->call_time < a->unit && p->ntouched > 0)
		want = 1;
	if (want > p->ntouched)
		want = p->ntouched;
	/* one sort, not a scan per unit: units x stacks is seconds of the
	 * daemon's loop for a call over 90,000 stacks */
	if (want > 0 && want < p->ntouched)
		qsort(a->rem, p->ntouched, sizeof(*a->rem), rem_cmp);
	for (size_t k = 0; k < want; k++)
		a->entries[p->touched[a->rem[k].i]].time += a->unit;
	p->ntouched = 0;
}

/* Cut @p's stack back to its innermost @frame; false if not on it. A
 * call's root is no frame the node can name: were it cut back to, or
 * replaced, two calls could share a stack, and an ended call's stacks
 * could not be freed alone (entries_drop_done()). */
static bool
cut(const struct trace_agg *a, struct proc *p, uint32_t frame)
{
	uint32_t base = a->calls ? 1 : 0;

	for (uint32_t i = p->n; i-- > base;)
		if (p->stack[i] == frame) {
			p->n = i + 1;
			return true;
		}
	return false;
}

static void
push(struct trace_agg *a, struct proc *p, uint32_t frame)
{
	if (p->n >= a->depth) {
		/* keep the innermost frames, and a call's root */
		uint32_t keep = a->calls ? 1 : 0;
		uint32_t drop = p->n - a->depth + 1;

		memmove(p->stack + keep, p->stack + keep + drop,
			(p->n - keep - drop) * sizeof(*p->stack));
		p->n -= drop;
	}
	p->stack[p->n++] = frame;
}

static struct proc *
proc_add(struct trace_agg *a, const struct fp_pid *pid, bool on, int64_t ts)
{
	struct proc *p;

	if (a->nprocs >= FP_TRACE_PROCS_MAX) {
		a->unkept++;
		return NULL;
	}
	if (a->nprocs == a->procs_cap) {
		a->procs_cap = a->procs_cap ? a->procs_cap * 2 : 4;
		a->procs = xrealloc(a->procs, a->procs_cap * sizeof(*a->procs));
	}
	p = &a->procs[a->nprocs++];
	*p = (struct proc){ .pid = *pid, .on = on, .t0 = ts,
			    .followed = a->follow != TRACE_NO_FRAME &&
					!pid_in(a->targets, a->ntargets, pid),
			    .server = pid_in(a->servers, a->nservers, pid) };
	a->last = a->nprocs - 1;
	return p;
}

/* A process whose call has ended holds nothing for the trace: its slot
 * goes to the next process that enters one, as a handler run in a
 * process per request needs. */
static void
proc_remove(struct trace_agg *a, struct proc *p)
{
	free(p->touched);
	*p = a->procs[--a->nprocs];
	a->last = 0;
}

static void step(struct trace_agg *a, struct proc *p, enum trace_ev ev,
		 uint32_t frame, bool has, int64_t ts);

/* --trace-call: enter starts a call's tree, leave ends it, and nothing
 * of a process outside a call counts. */
static void
call_event(struct trace_agg *a, const struct fp_pid *pid, enum trace_ev ev,
	   uint32_t frame, bool has, int64_t ts)
{
	struct proc *p = proc_find(a, pid);

	if (ev == TRACE_EV_ENTER) {
		if (!p)
			p = proc_add(a, pid, true, ts);
		if (!p || p->in_call || !has)
			return;
		++a->begun;
		p->stack[0] = a->root;
		p->stack[1] = frame;
		p->n = 2;
		p->in_call = true;
		p->call = a->begun;
		p->call_time = 0;
		p->ntouched = 0;
		p->on = true;
		p->t0 = ts;
		add(a, p, true, 0, 1);
		return;
	}
	if (!p || !p->in_call)
		return;
	if (ev == TRACE_EV_LEAVE) {
		if (ts > p->t0)
			add(a, p, p->on, (uint64_t)ts - (uint64_t)p->t0, 0);
		call_round(a, p);
		proc_remove(a, p);
		a->ended++;
		return;
	}
	if (ev == TRACE_EV_RETURN_TO && has && p->n == 2 && p->stack[1] != frame) {
		/* the function called returns to its caller: its leave
		 * comes next, and the caller is no part of the call */
		step(a, p, TRACE_EV_OTHER, frame, has, ts);
		return;
	}
	step(a, p, ev, frame, has, ts);
}

void
trace_agg_event(struct trace_agg *a, const struct fp_pid *pid,
		enum trace_ev ev, uint32_t frame, int64_t ts)
{
	bool has = frame != TRACE_NO_FRAME && frame < a->nframes;
	struct proc *p;

	if (a->calls) {
		call_event(a, pid, ev, frame, has, ts);
		return;
	}
	p = proc_find(a, pid);
	if (!p) {
		p = proc_add(a, pid, ev != TRACE_EV_IN, ts);
		if (!p)
			return;
		if (has)
			p->stack[p->n++] = frame;
	}
	step(a, p, ev, frame, has, ts);
}

/* @p's event: its time since the last one to the stack it had, then
 * the stack rules */
static void
step(struct trace_agg *a, struct proc *p, enum trace_ev ev, uint32_t frame,
     bool has, int64_t ts)
{
	if (ts > p->t0) {
		if (counts(p))
			add(a, p, p->on, (uint64_t)ts - (uint64_t)p->t0, 0);
		p->t0 = ts;
	}
	switch (ev) {
	case TRACE_EV_CALL:
		if (has && !cut(a, p, frame))
			push(a, p, frame);
		if (p->server && has)
			span_event(a, p, ev, frame);
		if (counts(p))
			add(a, p, true, 0, 1);
		break;
	case TRACE_EV_RETURN_TO:
		if (has && !cut(a, p, frame)) {
			if (p->n > (a->calls ? 1u : 0u))
				p->stack[p->n - 1] = frame;
			else
				push(a, p, frame);
		}
		if (p->server && has)
			span_event(a, p, ev, frame);
		break;
	case TRACE_EV_IN:
		if (p->n == 0 && has)
			p->stack[p->n++] = frame;
		p->on = true;
		break;
	case TRACE_EV_OUT:
		p->on = false;
		break;
	case TRACE_EV_OTHER:
	case TRACE_EV_ENTER:
	case TRACE_EV_LEAVE:
		break;
	}
}

/*
 * The stacks of ended calls have been handed out (call_round() left them
 * whole units): free them, so that the aggregate holds what the calls in
 * progress charged, not the stacks of every call since the trace began
 * (no stack is shared between calls: each has its own root). The rest
 * move down, the calls in progress follow their entries there, and the
 * index is rebuilt at a size for what is left.
 */
static void
entries_drop_done(struct trace_agg *a)
{
	uint32_t *to = xzalloc((size_t)a->nentries * sizeof(*to));
	uint32_t n = 0, cap = 64;

	for (uint32_t i = 0; i < a->nentries; i++) {
		if (a->entries[i].done) {
			free(a->entries[i].key);
			to[i] = UINT32_MAX;
			continue;
		}
		to[i] = n;
		a->entries[n++] = a->entries[i];
	}
	for (uint32_t i = 0; i < a->nprocs; i++) {
		struct proc *p = &a->procs[i];

		for (size_t k = 0; k < p->ntouched; k++)
			p->touched[k] = to[p->touched[k]];
	}
	free(to);
	a->nentries = n;
	a->ndone = 0;
	while (cap < 2 * n)
		cap *= 2;
	if (cap < a->entries_cap) {
		a->entries_cap = cap;
		a->entries = xrealloc(a->entries,
				      a->entries_cap * sizeof(*a->entries));
	}
	index_build(&a->eidx, &a->eidx_cap, cap, &a->entries[0].hash,
		    sizeof(*a->entries), n);
}

void
trace_agg_flush(struct trace_agg *a, bool final,
		void (*each)(const struct fp_trace_stack *stack, void *data),
		void *data)
{
	for (uint32_t i = 0; i < a->nentries; i++) {
		struct entry *e = &a->entries[i];
		uint64_t units = final ? (e->time + a->unit / 2) / a->unit :
				 e->time / a->unit;
		struct fp_trace_stack st;
		uint32_t n = e->keylen - KEY_HEAD;
		bool followed = (e->key[2] & 2u) != 0;

		if (units == 0)
			continue;
		for (uint32_t k = 0; k < n; k++) {
			/* leaf first */
			const struct frame *f = &a->frames[e->key[e->keylen - 1 - k]];

			a->out[k] = (struct fp_frame){
				.module = f->module,
				.function = f->function,
				.arity = f->arity,
			};
		}
		if (a->calls && n > 0) {
			snprintf(a->root_name, sizeof(a->root_name), "%" PRIu64,
				 (uint64_t)e->key[3] << 32 | e->key[4]);
			a->out[n - 1].function = a->root_name;
		}
		if (followed) {
			const struct frame *f = &a->frames[a->follow];

			a->out[n++] = (struct fp_frame){
				.module = f->module,
				.function = f->function,
				.arity = f->arity,
			};
		}
		st = (struct fp_trace_stack){
			.pid = { .num = e->key[0], .serial = e->key[1] },
			.on_cpu = (e->key[2] & 1u) != 0,
			.followed = followed,
			.frames = a->out,
			.nframes = n,
			.units = units,
			.calls = e->calls,
		};
		each(&st, data);
		e->time = units * a->unit > e->time ? 0 : e->time - units * a->unit;
		e->calls = 0;
	}
	if (final) {
		for (uint32_t i = 0; i < a->nentries; i++)
			free(a->entries[i].key);
		a->nentries = 0;
		a->ndone = 0;
		memset(a->eidx, 0xff, a->eidx_cap * sizeof(*a->eidx));
		/* a call still open names no entry now */
		for (uint32_t i = 0; i < a->nprocs; i++)
			a->procs[i].ntouched = 0;
	} else if (a->ndone > 0) {
		entries_drop_done(a);
	}
}
