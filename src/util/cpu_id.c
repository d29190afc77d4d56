/* The CPU's model name and count, read once per call from /proc/cpuinfo
 * (cpu_id.h). */
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "util/cpu_id.h"

void ts_cpu_model(char *buf, size_t n)
{
    char model[200] = "unknown-cpu";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10)) continue;
            char *c = strchr(line, ':');
            if (!c) continue;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            c[strcspn(c, "\n")] = 0;
            snprintf(model, sizeof model, "%s", c);
            break;
        }
        fclose(f);
    }
    snprintf(buf, n, "%s x%d", model, omp_get_num_procs());
}
