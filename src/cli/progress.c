/* Progress of the long subcommands (verify; generate prints its stages),
 * always on stderr so that stdout keeps only results: a bar redrawn in
 * place on a terminal, plain lines (every tenth of the work) otherwise,
 * so that a log shows how far a killed run got. */
#include <stdio.h>
#include <unistd.h>
#include "cli/cli.h"
#include "util/clock.h"

void cli_progress_start(cli_progress *p, const char *what, const char *unit, long total)
{
    *p = (cli_progress){.what = what, .unit = unit, .total = total, .tty = isatty(2), .t0 = ts_clock_ms()};
    p->last_ms = p->t0;
    if (!p->tty) fprintf(stderr, "%s: %ld %s\n", what, total, unit);
    cli_progress_update(p, 0);
}

void cli_progress_update(cli_progress *p, long done)
{
    double now = ts_clock_ms();
    if (p->tty) {
        if (done < p->total && now - p->last_ms < 100 && done) return; /* redraw at most 10 times a second */
        int width = 30, full = p->total ? (int)(width * done / p->total) : width;
        char bar[64];
        for (int i = 0; i < width; i++) bar[i] = i < full ? '#' : '.';
        bar[width] = 0;
        fprintf(stderr, "\r%s [%s] %ld/%ld %s  %3.0f%%  %.1f s ", p->what, bar, done, p->total, p->unit,
                p->total ? 100.0 * (double)done / (double)p->total : 100.0, (now - p->t0) / 1000);
    } else {
        int tenth = p->total ? (int)(10 * done / p->total) : 10;
        if (tenth <= p->tenth || done >= p->total) return; /* the end has its own line */
        p->tenth = tenth;
        fprintf(stderr, "%s: %ld of %ld %s (%d%%), %.1f s\n", p->what, done, p->total, p->unit, tenth * 10,
                (now - p->t0) / 1000);
    }
    p->last_ms = now;
    fflush(stderr);
}

void cli_progress_end(cli_progress *p, long done)
{
    if (p->tty) {
        p->last_ms = 0;
        cli_progress_update(p, done);
        fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s: %ld of %ld %s done, %.1f s\n", p->what, done, p->total, p->unit,
                (ts_clock_ms() - p->t0) / 1000);
    }
    fflush(stderr);
}
