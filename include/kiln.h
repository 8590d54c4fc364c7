/* Kiln: a C11 library for deep learning.
 *
 * Build tensor graphs, differentiate them into more graph, compile and run
 * them on the CPU.  Every exported name starts with kiln_ or KILN_.
 *
 * Error model: one rule for every object that can fail.  Functions that
 * can fail return a kiln_status (or NULL) and leave a message on the
 * object they were given, which holds a status and a message:
 *  - a graph (kiln_graph_error) is sticky: builders never abort; the first
 *    error is kept and later builders return a poisoned node at once, so a
 *    chain of calls is checked once at the end.  kiln_graph_clear clears it.
 *  - every other object -- a session and what runs on it (functions,
 *    dynamic runs, optimisers, computations: kiln_session_error), a program
 *    (kiln_program_error, after its graph's error), a batcher
 *    (kiln_batcher_error) -- is cleared when a call that can record an
 *    error on it starts: the message is "" after a success and describes
 *    the latest failed call otherwise, never an older one.  Calls that
 *    cannot fail on the object (getters, plain switches) leave it as is.
 *  - kiln_last_error() (per thread) is only for calls with no object to
 *    hold the message: constructors that return NULL, a NULL object
 *    ("kiln_feed: session is NULL"), functions with no object (file
 *    readers and writers, kiln_init_fill) and read-only calls on a const
 *    object (kiln_graph_print to a NULL stream).  It is never cleared by a
 *    success: read it right after the failed call.
 *
 * Threads: a graph, a session and what belongs to them (its functions,
 * optimisers, programs, computations) are used by one thread at a time.
 * Separate sessions on separate graphs may run in separate threads at once:
 * each gives bitwise the values it gives run alone, since every run splits
 * its work by its own session's thread count, never by timing.  Separate
 * sessions may also run one built graph dynamically at once (kiln_feed,
 * kiln_forward, kiln_backward: the gradient nodes kiln_backward builds are
 * built once, under the graph's own lock); building other nodes on a graph
 * while it runs stays the caller's to prevent.  Execution
 * settings (threads, kernel choice, denormal mode, profile, debug stream)
 * belong to each session (kiln_session_options and the session setters);
 * the process-wide setters kiln_set_num_threads, kiln_set_flush_denormals,
 * kiln_set_reference_kernels and kiln_set_debug_stream are safe to call at
 * any time and only give the defaults of sessions made afterwards.  The log
 * level and callback (kiln_set_logging_level, kiln_set_logging_callback) are
 * the only other global state: set them before starting threads; the callback
 * is called on the thread that logs, so it must be thread-safe when sessions
 * run in several threads. kiln_last_error() is per thread.  OpenBLAS is set to
 * one thread: Kiln threads its matrix products itself.
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
#include "kiln/onnx.h"
#include "kiln/dist.h"

#endif /* KILN_H */
