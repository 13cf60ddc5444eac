/*
 * flame_profd — the flight recorder (flight.c): the last --flight-recorder
 * DUR of records kept in memory as zstd frames, a second destination of
 * the recorder (recorder.h), and the captures it writes when a trigger
 * fires (trigger.h) or SIGUSR2 comes.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recorder.h"
#include "retention.h"
#include "trigger.h"

struct fpd_output;
struct fpd_source;

#define FPD_FLIGHT_MAX_MIN (1u << 20)	/* --flight-recorder-max at least 1M */
#define FPD_FLIGHT_PER_HOUR_DEFAULT 10	/* --max-captures-per-hour */
#define FPD_FLIGHT_PER_HOUR_MAX 3600

struct fpd_flight_config {
	uint64_t window_us;		/* --flight-recorder */
	uint64_t max_bytes;		/* --flight-recorder-max: the hard cap */
	uint64_t after_us;		/* --after */
	uint64_t holdoff_us;		/* --trigger-holdoff */
	unsigned max_per_hour;		/* --max-captures-per-hour (0: the
					 * default) */
	int level;			/* zstd level of the frames */
	const char *header;		/* the files' header (notes.h) */
	const struct fpd_trigger *triggers;
	size_t ntriggers;
	/* told when a capture's after-window begins (@on) and ends, for
	 * --burst-rate/--burst-top; may be NULL */
	void (*burst)(void *data, bool on);
	void *burst_data;
};

/* What the ring holds and has done, for the log and the tests. */
struct fpd_flight_stats {
	uint64_t bytes;			/* frames and the segment being filled */
	uint64_t peak_bytes;
	uint64_t frames;		/* frames held */
	uint64_t samples;		/* samples held in frames */
	uint64_t oldest_us, newest_us;	/* sample times held in frames */
	uint64_t dropped_frames;	/* frames let go, oldest first */
	uint64_t captures;		/* captures finished */
	uint64_t suppressed;		/* triggers held off */
	uint64_t capped;		/* triggers over --max-captures-per-hour */
	/* The last trigger that fired, whatever became of it: its text
	 * ("mailbox>50000", "SIGUSR2", "ctl"), the reason a ctl gave
	 * (escaped), when, and what it did. */
	char last_trigger[64];
	char last_reason[FPD_CAPTURE_REASON_MAX];
	uint64_t last_trigger_us;
	const char *last_outcome;	/* "captured", "held off", "capped" */
};

struct fpd_flight;

/**
 * A flight recorder as @c says (copied; header and triggers must outlive
 * it), writing its captures under @out's node directory and listing them
 * in its manifest; @out may be NULL (the ring alone: captures are then
 * refused, as the unit tests use it).
 * @return the recorder; the caller frees it with fpd_flight_destroy().
 */
struct fpd_flight *
fpd_flight_new(const struct fpd_flight_config *c, struct fpd_output *out);

/** Finishes the capture being written with what it has; NULL is a no-op. */
void
fpd_flight_destroy(struct fpd_flight *f);

/** The ring as the recorder's second destination (fpd_recorder_add_dest()). */
struct fpd_record_dest
fpd_flight_dest(struct fpd_flight *f);

/** The loop's view of it: a tick that seals a frame a second and writes
 * the capture due, and SIGUSR2. Owned by @f. */
struct fpd_source *
fpd_flight_source(struct fpd_flight *f);

/**
 * Compress the segment being filled into a frame of the ring (what the
 * tick does once a second), then let go of the frames beyond the window
 * and the cap, oldest first.
 */
void
fpd_flight_seal(struct fpd_flight *f);

/**
 * Begin a capture: @trigger fired with @value (0 for a signal) on the
 * process @pid ("<0.1.0>", or NULL), at the wall-clock time @now_us.
 * @return 0; -EBUSY while a capture is being written or the trigger is
 *         held off (counted in stats.suppressed); -EDQUOT when
 *         --max-captures-per-hour captures began in the last hour
 *         (counted in stats.capped, logged, nothing written); -ENOTDIR
 *         without an output.
 */
int
fpd_flight_fire(struct fpd_flight *f, const char *trigger, int64_t value,
		const char *pid, uint64_t now_us);

/**
 * Begin a capture asked for by `flame_profd ctl trigger` (kind "ctl"),
 * with @reason as given (escaped here for the manifest and the log),
 * at the wall-clock time @now_us. Not held off by --trigger-holdoff,
 * which is a trigger's own; --max-captures-per-hour applies.
 * @param dir if not NULL, gets the capture's directory name (@size bytes).
 * @return as fpd_flight_fire().
 */
int
fpd_flight_fire_ctl(struct fpd_flight *f, const char *reason, uint64_t now_us,
		    char *dir, size_t size);

/** Captures begun in the last hour (--max-captures-per-hour counts them). */
unsigned
fpd_flight_last_hour(const struct fpd_flight *f);

/** Set config.burst and its data after the recorder is made (the session
 * is made after it). */
void
fpd_flight_set_burst(struct fpd_flight *f, void (*burst)(void *data, bool on),
		     void *data);

/** The run's output directory of the node (NULL for a ring alone). */
const char *
fpd_flight_dir(const struct fpd_flight *f);

/** What the ring holds now. */
const struct fpd_flight_stats *
fpd_flight_stats(const struct fpd_flight *f);
