/*
 * flame_profd — log handler for libsample.
 *
 * The library never prints. The program installs one handler; messages
 * below the threshold are dropped before they are formatted.
 */
#pragma once

#include <stdarg.h>

enum fp_log_priority {
	FP_LOG_DEBUG = 10,
	FP_LOG_INFO = 20,
	FP_LOG_WARNING = 30,
	FP_LOG_ERROR = 40,
};

typedef void (*fp_log_handler)(enum fp_log_priority priority,
			       const char *format, va_list args);

/**
 * Install the log handler; NULL drops every message. Messages with a
 * priority below @threshold are not formatted at all.
 */
void
fp_log_set_handler(fp_log_handler handler, enum fp_log_priority threshold);

/** Returns non-zero when a message of @priority would reach the handler. */
int
fp_log_enabled(enum fp_log_priority priority);

/** Log a printf-style message at @priority through the installed handler. */
void
fp_log(enum fp_log_priority priority, const char *format, ...)
	__attribute__((format(printf, 2, 3)));
