/*
 * flame_profd — how a node session samples: two peers behind one small
 * interface. The slots (sampling-slots.c) ask the node for samples, a
 * few requests in flight at a time (the rex and eval request paths);
 * the helper (sampling-helper.c, --request helper) tells the module on
 * the node what to sample and takes the batches it sends. What both
 * share, the set sampled round robin, what is owed and the writing of
 * samples, is session-sampling.c's.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct fpd_session;
struct fp_reply;

/* Any op but new and destroy may be NULL: nothing to do then (and, for
 * in_flight and on_reply, false). */
struct fpd_sampling_ops {
	/** The sampler's own state for @s; freed by destroy. */
	void *(*new)(struct fpd_session *s);
	void (*destroy)(void *state);
	/** Connected (again), the set built: the first requests. */
	void (*connected)(struct fpd_session *s, uint64_t now);
	/** The set was rebuilt (fpd_sampling_rebuild()). */
	void (*set_changed)(struct fpd_session *s);
	/** Every tick while the breaker is closed, what is owed counted. */
	void (*tick)(struct fpd_session *s, uint64_t now);
	/** Every tick after the budget's: tell the node what changed. */
	void (*sync)(struct fpd_session *s);
	/** A reply: whether it was the sampler's (and then handled). */
	bool (*on_reply)(struct fpd_session *s, struct fp_reply *reply,
			 uint64_t now);
	/** Every tick: the sampler's requests unanswered for --timeout. */
	void (*expire)(struct fpd_session *s, uint64_t now);
	/** Stopping: whether samples are still in flight. */
	bool (*in_flight)(const struct fpd_session *s);
	/** Stopping: ask for what is still owed. */
	void (*drain)(struct fpd_session *s, uint64_t now);
	/** The connection is lost: what was in flight is skipped. */
	void (*reset)(struct fpd_session *s);
	/** Stopping for good: the samples still asked for are skipped. */
	void (*abandon)(struct fpd_session *s);
};

/* sampling-slots.c: sample requests, MAX_INFLIGHT at a time */
extern const struct fpd_sampling_ops fpd_sampling_slots;

/* sampling-helper.c: the helper module's batches */
extern const struct fpd_sampling_ops fpd_sampling_helper;
