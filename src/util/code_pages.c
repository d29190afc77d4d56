/* Code pages only planning ran.
 *
 * Building a plan runs code that running it never does: the importer, the
 * lowering, and above all oneDNN's kernel generators (Xbyak code that
 * writes each primitive's machine code into an anonymous mapping at
 * creation; at run time libdnnl contributes its drivers only).  Those text
 * pages stay mapped, and counted in the resident set, for the process's
 * life: libdnnl held 5.2 MiB resident on squeezenet1_1, the code of the
 * kernel families the plan created.  A faster plan that uses one more
 * family (squeezenet1_1's concat blocks: +0.65 MiB of libdnnl text) then
 * raised the peak resident set above an older binary's whose anonymous
 * memory was the same (issue 27).
 *
 * Safety: MADV_DONTNEED on a private file mapping discards the process's
 * page-table entries and any private (copy-on-write) copies; the next
 * access maps the file's pages again.  An r-x mapping of a position-
 * independent object is never written (no text relocations), so what comes
 * back is what was there.  The one exception is a debugger's breakpoints
 * (written into a private copy): they are lost, as after any re-exec of a
 * page.  The objects are read from /proc/self/maps by device and inode, so
 * a library replaced on disk after it was loaded is still the mapped one
 * (a new file is a new inode; the old one stays until unmapped). */
#include "util/code_pages.h"
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

typedef struct map_line {
    uintptr_t lo, hi;
    char perm[8];
    unsigned long long inode;
    char dev[16];
} map_line;

static bool parse(const char *line, map_line *m)
{
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx %7s %*s %15s %llu", &lo, &hi, m->perm, m->dev, &m->inode) != 5) return false;
    m->lo = lo;
    m->hi = hi;
    return m->inode != 0; /* anonymous, [heap], [stack], [vdso]: inode 0 */
}

#define CODE_OBJECTS_MAX 8

size_t xcode_pages_release(const uintptr_t *addrs, int n)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[4096];
    map_line m, obj[CODE_OBJECTS_MAX];
    int nobj = 0;
    /* the objects: the mappings holding the addresses */
    while (nobj < CODE_OBJECTS_MAX && fgets(line, sizeof line, f))
        for (int i = 0; i < n; i++)
            if (parse(line, &m) && addrs[i] >= m.lo && addrs[i] < m.hi) {
                obj[nobj++] = m;
                break;
            }
    rewind(f);
    size_t total = 0;
    while (fgets(line, sizeof line, f)) {
        if (!parse(line, &m) || strcmp(m.perm, "r-xp")) continue;
        for (int i = 0; i < nobj; i++)
            if (m.inode == obj[i].inode && !strcmp(m.dev, obj[i].dev)) {
                if (!madvise((void *)m.lo, m.hi - m.lo, MADV_DONTNEED)) total += m.hi - m.lo;
                break;
            }
    }
    fclose(f);
    return total;
}
