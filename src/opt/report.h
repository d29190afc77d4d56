/* The markdown report of an optimize run (report.c). */
#ifndef TS_OPT_REPORT_H
#define TS_OPT_REPORT_H

#include "tsopt.h"

/* Writes PATH.tmp then renames it over path; pictures of both graphs go
 * beside it (PATH.before.svg, PATH.after.svg). */
ts_status ts_opt_report_write(const char *path, const char *model, const char *output, const ts_graph *original,
                              const ts_optimize_opts *o, const ts_optimize_result *r, ts_error *err);

#endif
