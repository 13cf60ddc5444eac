/*
 * flame_profd — one run of the daemon (run.c).
 */
#pragma once

#include <stdbool.h>

struct fpd_ctl;
struct fpd_flight;
struct fpd_options;
struct fpd_output;
struct fpd_recorder;

/** Run the daemon with @o and the node's @cookie until it stops.
 * @return its exit code (enum fpd_exit). */
int
fpd_run(const struct fpd_options *o, const char *cookie);

/**
 * The output of o->node under o->out_dir (fpd_output_new()), with the
 * file header and manifest options of @o.
 * @return it (the caller's), or NULL with *@exit_code set and why logged.
 */
struct fpd_output *
fpd_run_open_output(const struct fpd_options *o, int *exit_code);

/** --user: hand @out's directory to o->user. @return 0 or an exit code,
 * with why logged. */
int
fpd_run_hand_over(const struct fpd_options *o, struct fpd_output *out);

/** --user: drop root for good. @return 0 or an exit code, with why
 * logged. */
int
fpd_run_drop_privileges(const struct fpd_options *o);

/**
 * With o->flight_us, the flight recorder of @rec's node, a second
 * destination of its records, its file header in *@header (both the
 * caller's: fpd_flight_destroy(), then free()); else NULL.
 */
struct fpd_flight *
fpd_run_open_flight(const struct fpd_options *o, struct fpd_recorder *rec,
		    char **header);

/**
 * The control socket of @rec's node (ctl.h), answering for @flight (may
 * be NULL), made as the user the daemon now runs as.
 * @return 0 with *@ctl (the caller's), or FPD_EXIT_CANTCREAT, logged.
 */
int
fpd_run_open_ctl(const struct fpd_options *o, struct fpd_recorder *rec,
		 struct fpd_flight *flight, struct fpd_ctl **ctl);

/** A flight recorder's burst hook (flight.h) for the session @session. */
void
fpd_run_burst(void *session, bool on);

/**
 * Run the daemon on several nodes (fpd_options_fleet()): every --node,
 * each with @cookies[i] (or @cookie where NULL), and with --discover
 * every node epmd lists, with @cookie (fleet.c).
 * @return its exit code (enum fpd_exit).
 */
int
fpd_run_fleet(const struct fpd_options *o, const char *cookie,
	      char *const *cookies);
