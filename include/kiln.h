/* Kiln: a C11 library for deep learning.
 *
 * Build tensor graphs, differentiate them into more graph, compile and run
 * them on the CPU.  Every exported name starts with kiln_ or KILN_.
 *
 * Error model: graph builders never abort.  The first error is recorded in
 * the graph (kiln_graph_error) and later builders return a poisoned node, so
 * a chain of calls can be checked once at the end.  Functions that can fail
 * return a kiln_status; the message is on the object they were given
 * (kiln_graph_error, kiln_session_error) or, for functions with neither
 * or when that object is itself NULL, in kiln_last_error() ("kiln_feed:
 * session is NULL").  A builder given a NULL graph returns NULL and says so
 * in kiln_last_error() ("kiln_add: graph is NULL").
 *
 * Threads: a graph, a session and what belongs to them (its functions,
 * optimisers, programs, computations) are used by one thread at a time.
 * Separate sessions on separate graphs may run in separate threads at once:
 * each gives bitwise the values it gives run alone, since every run splits
 * its work by its own session's thread count, never by timing.  Execution
 * settings (threads, kernel choice, denormal mode, profile, debug stream)
 * belong to each session (kiln_session_options and the session setters);
 * the process-wide setters kiln_set_num_threads, kiln_set_flush_denormals,
 * kiln_set_reference_kernels and kiln_set_debug_stream are safe to call at
 * any time and only give the defaults of sessions made afterwards.  The log level and callback (kiln_set_logging_level,
 * kiln_set_logging_callback) are the only other global state: set them before
 * starting threads; the callback is called on the thread that logs, so it
 * must be thread-safe when sessions run in several threads.
 * kiln_last_error() is per thread.  OpenBLAS is set to one thread: Kiln
 * threads its matrix products itself.
 */
#ifndef KILN_H
#define KILN_H

/* The API by area, each part usable alone (it includes what it needs). */
#include "kiln/core.h"
#include "kiln/graph.h"
#include "kiln/ops.h"
#include "kiln/autodiff.h"
#include "kiln/execution.h"
#include "kiln/train.h"
#include "kiln/io.h"
#include "kiln/axes.h"
#include "kiln/modules.h"

#endif /* KILN_H */
