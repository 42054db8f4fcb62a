/* lce_plugin.h — subjects loaded at run time from a shared library that implements the public
 * interface include/lcecheck/lcecheck_subject.h: `--subject plugin:PATH[#NAME]`.
 *
 * lce_plugin_open dlopens PATH, looks up lcecheck_subject_entry, checks the ABI version and picks the
 * subject NAME (or the first), and makes an lce_subject of it: its name is the spec itself (so a
 * repro line names it again), ctx the loaded plugin, run_ctx a trampoline that maps lce_case,
 * lce_tensors and lce_outputs onto the public structs (pointers, no copies), caps mapped bit by bit,
 * golden_class the plugin's (fused-host when it names none), inner from its K hint. */
#ifndef LCE_PLUGIN_H
#define LCE_PLUGIN_H

#include "lce_subject.h"

#define LCE_PLUGIN_PREFIX "plugin:"

/* spec is "PATH" or "PATH#NAME" (without the plugin: prefix). NULL on failure, with st naming the
 * problem: the file cannot be loaded (dlerror's text), the entry symbol is missing, the ABI versions
 * differ (both numbers), NAME is not in the library (the names it has), a table without a run
 * function. The subject stays valid until lce_plugin_close. */
lce_subject *lce_plugin_open(const char *spec, lce_status *st);
/* Unloads the library and frees the subject (NULL is a no-op). */
void lce_plugin_close(lce_subject *s);

#endif
