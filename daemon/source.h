/*
 * flame_profd — a source of samples, as the loop sees it: something with
 * (at most) one descriptor to wait on, a tick, and work deferred until
 * its handlers have returned. A node session (session.c) is one, the
 * --perf source (source-perf.c) another; the loop knows no more of them
 * than this.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* What the loop and its sources share about stopping; the loop owns it. */
struct fpd_run_state {
	bool stopping;
	uint64_t stop_mono;	/* when the stop was asked (0: stopped by a
				 * source, no grace) */
	int exit_code;
};

/* A source gives up the run: stop at once (no drain) with @exit_code. */
static inline void
fpd_run_fail(struct fpd_run_state *run, int exit_code)
{
	if (exit_code)
		run->exit_code = exit_code;
	run->stopping = true;
}

struct fpd_source;

/* fd and input are always given; any other op may be NULL: the source
 * has nothing to do then (and, for in_flight, nothing in flight). */
struct fpd_source_ops {
	/** The descriptor to wait on for input, or -1. */
	int (*fd)(struct fpd_source *src);
	/** The descriptor is readable (or hung up). */
	void (*input)(struct fpd_source *src);
	/**
	 * Before every timer tick, ahead of reading the clock @now of
	 * tick: take in what came without waking the loop. What is written
	 * here then never opens a file younger than @now, which rotation
	 * would take for one long due.
	 */
	void (*collect)(struct fpd_source *src);
	/** Every timer tick. */
	void (*tick)(struct fpd_source *src, uint64_t now);
	/**
	 * After each of the loop's calls to input, tick and drain: the
	 * work their handlers only recorded (a lost connection is torn
	 * down here, never from inside a handler).
	 */
	void (*settle)(struct fpd_source *src);
	/** Stopping: ask for what is still owed (once per wait). */
	void (*drain)(struct fpd_source *src, uint64_t now);
	/** Stopping: whether samples are still in flight. */
	bool (*in_flight)(struct fpd_source *src);
	/** Stopping for good: what is still in flight is given up. */
	void (*abandon)(struct fpd_source *src);
	/** Finish the file being written (SIGUSR1, a second SIGINT); may
	 * come from inside the source's own wait (fpd_loop_give_up()). */
	void (*rotate)(struct fpd_source *src);
	/** SIGUSR2: write a capture of what the flight recorder holds. */
	void (*capture)(struct fpd_source *src);
};

struct fpd_source {
	const struct fpd_source_ops *ops;
};
