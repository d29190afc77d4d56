/* Code pages only planning ran (code_pages.c). */
#ifndef TS_UTIL_CODE_PAGES_H
#define TS_UTIL_CODE_PAGES_H

#include <stddef.h>
#include <stdint.h>

/* Drops from this process's resident set the pages of the executable
 * (r-x, file-backed) mappings of the objects that contain the n addresses
 * (a library's, the program's own).  The pages stay in the page cache: code
 * run later faults back in (a minor fault per 64 KiB read).  Returns the
 * bytes of the mappings it covered; 0 where /proc/self/maps cannot be read. */
size_t xcode_pages_release(const uintptr_t *addrs, int n);

#endif
