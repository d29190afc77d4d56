/* File-system checks shared by the command and the library entry points. */
#ifndef TS_UTIL_PATH_H
#define TS_UTIL_PATH_H

#include "tsopt.h"

/* A file about to be written at path: its folder must exist and be
 * writable and path must not be a folder.  Checked before long work, so a
 * typo costs nothing.  `what` names the path in the error ("-o",
 * "--report", "output"). */
ts_status ts_path_check_writable(const char *what, const char *path, ts_error *err);
/* from's bytes written unchanged at to (through to.tmp and a rename). */
ts_status ts_path_copy(const char *from, const char *to, ts_error *err);

#endif
