/* error.c: formatting of coli_err messages. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int coli_errf(coli_err *e, int code, const char *fmt, ...)
{
	if (!e)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	e->code = code;
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

void coli_err_prefix(coli_err *e, const char *prefix)
{
	if (!e)
		return;
	char tmp[sizeof(e->msg)];
	memcpy(tmp, e->msg, sizeof(tmp));
	int n = snprintf(e->msg, sizeof(e->msg), "%s: ", prefix);
	if (n >= 0 && (size_t)n < sizeof(e->msg))
		snprintf(e->msg + n, sizeof(e->msg) - (size_t)n, "%.*s", (int)(sizeof(e->msg) - (size_t)n - 1), tmp);
}

int coli_err_exit_status(const coli_err *e)
{
	return e && e->code == COLI_EUSAGE ? 2 : 1;
}
