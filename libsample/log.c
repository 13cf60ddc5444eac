/*
 * flame_profd — libsample logging.
 */
#include <stdarg.h>
#include <stddef.h>

#include "fp/log.h"

static fp_log_handler log_handler;
static enum fp_log_priority log_threshold = FP_LOG_INFO;

void
fp_log_set_handler(fp_log_handler handler, enum fp_log_priority threshold)
{
	log_handler = handler;
	log_threshold = threshold;
}

int
fp_log_enabled(enum fp_log_priority priority)
{
	return log_handler != NULL && priority >= log_threshold;
}

void
fp_log(enum fp_log_priority priority, const char *format, ...)
{
	va_list args;

	if (!fp_log_enabled(priority))
		return;

	va_start(args, format);
	log_handler(priority, format, args);
	va_end(args);
}
