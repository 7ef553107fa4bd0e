/*
 * exporters.h - the timeline formats a trace is exported in, in one table:
 * each one's name (what --format and Trace.export call it), its writer,
 * the ending of its file names and whether it is binary. Whatever picks an
 * exporter by name looks here: Trace.export and export_merged
 * (ext/tracefile/trace_type.c), and the Python format registry
 * (stackwatch/render/formats.py, through _native.TRACE_EXPORTERS). A new
 * timeline format replayed from the records is one row and its writer. The
 * sequence diagram of task events is not one: it is drawn from the task
 * document of stackwatch/tracer/task_events.py (the one reader of task
 * events), so its entry is in formats.py alone (render/sequence.py).
 */
#ifndef SW_EXPORTERS_H
#define SW_EXPORTERS_H

#include "export_chrome.h"
#include "export_ctf.h"
#include "export_perfetto.h"

/* X(name, writer, suffix, binary, directory), in the order the command
 * line lists them; writer is an sw_export_fn (export_walk.h). A directory
 * format's output is a directory the caller creates (empty): `directory`
 * is the path of its first file inside it (NULL: not a directory format),
 * which the caller creates (with the folders on its path) and gives the
 * writer opened, with the directory's name in sw_export_opts.dir. */
#define SW_TRACE_EXPORTERS(X)                                     \
    X(perfetto, sw_export_perfetto, ".pftrace", 1, NULL)          \
    X(chrome, sw_export_chrome, ".json", 0, NULL)                 \
    X(ctf, sw_export_ctf, ".ctf", 1, SW_CTF_FIRST_FILE)

typedef struct sw_exporter {
    const char *name;
    sw_export_fn write;
    const char *suffix;      /* the ending of its default file name */
    int binary;
    const char *directory;   /* writes a directory: its first file's path in it, else NULL */
} sw_exporter;

extern const sw_exporter sw_exporters[];
extern const size_t sw_exporter_count;

/* The exporter called `name`, or NULL. */
const sw_exporter *sw_exporter_find(const char *name);
/* Their names, ", "-separated in the table's order, into buf (for
 * messages). */
void sw_exporter_names(char *buf, size_t len);

#endif
