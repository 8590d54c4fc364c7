/* A session's execution context: thread count, kernel choice, denormal
   mode, profile and debug stream, taken from the session's options and the
   process defaults when it is made, changed only through the session.  Runs
   pass it down with every kernel call, so two sessions on two threads never
   see each other's settings. */
#include <stdio.h>

#include "cpu/profile.h"
#include "runtime/runtime.h"

static int clamp_threads(int n)
{
    return n < KILN_MAX_THREADS ? n : KILN_MAX_THREADS;
}

/* A switch option: 1 on, -1 off, 0 the default given. */
static int resolve(int opt, int dflt)
{
    return opt == 0 ? dflt : opt > 0;
}

/* KILN_OK when every option is in range, else KILN_ERR_ARG with
   kiln_last_error naming the first one that is not. */
static kiln_status check_options(const kiln_session_options *o)
{
    if (o->threads < 0) {
        kiln_set_last_error("kiln_session_new: threads is %d: give 0 for the "
                            "default or a count from 1",
                            o->threads);
        return KILN_ERR_ARG;
    }
    const char *name[] = {"reference_kernels", "flush_denormals", "profile"};
    int value[] = {o->reference_kernels, o->flush_denormals, o->profile};
    for (int i = 0; i < 3; i++)
        if (value[i] < -1 || value[i] > 1) {
            kiln_set_last_error("kiln_session_new: %s is %d: give 1 (on), -1 "
                                "(off) or 0 (the default)",
                                name[i], value[i]);
            return KILN_ERR_ARG;
        }
    return KILN_OK;
}

kiln_status kiln_session_exec_init(kiln_session *s,
                                   const kiln_session_options *opt)
{
    kiln_session_options o = opt ? *opt : (kiln_session_options){.seed = 42};
    if (check_options(&o) != KILN_OK)
        return KILN_ERR_ARG;
    s->seed = o.seed;
    s->exec = kiln_exec_defaults();
    if (o.threads > 0)
        s->exec.threads = clamp_threads(o.threads);
    s->exec.reference = resolve(o.reference_kernels, s->exec.reference);
    s->exec.flush_denormals =
        resolve(o.flush_denormals, s->exec.flush_denormals);
    if (o.debug_stream)
        s->exec.debug = o.debug_stream;
    s->profile_to_stderr = o.profile == 0 && kiln_profile_env();
    if (resolve(o.profile, s->profile_to_stderr) &&
        !(s->exec.profile = kiln_profile_new())) {
        kiln_set_last_error("kiln_session_new: out of memory");
        return KILN_ERR_MEMORY;
    }
    return KILN_OK;
}

void kiln_session_exec_free(kiln_session *s)
{
    if (s->exec.profile && s->profile_to_stderr)
        kiln_profile_print(s->exec.profile, stderr);
    kiln_profile_free(s->exec.profile);
    s->exec.profile = NULL;
}

int kiln_session_threads(const kiln_session *s)
{
    return s ? s->exec.threads : 0;
}

kiln_status kiln_session_get_options(const kiln_session *s,
                                     kiln_session_options *opt)
{
    if (!s || !opt)
        return kiln_null_arg("kiln_session_get_options",
                             s ? "options" : "session");
    *opt = (kiln_session_options){
        .seed = s->seed,
        .threads = s->exec.threads,
        .reference_kernels = s->exec.reference ? 1 : -1,
        .flush_denormals = s->exec.flush_denormals ? 1 : -1,
        .profile = s->exec.profile ? 1 : -1,
        .debug_stream = s->exec.debug,
    };
    return KILN_OK;
}

kiln_status kiln_session_set_threads(kiln_session *s, int n)
{
    if (kiln_session_begin(s, "kiln_session_set_threads") != KILN_OK)
        return KILN_ERR_ARG;
    if (n < 0)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_session_set_threads: %d threads: give "
                                 "0 for the default or a count from 1",
                                 n);
    s->exec.threads = n > 0 ? clamp_threads(n) : kiln_exec_defaults().threads;
    return KILN_OK;
}

kiln_status kiln_session_set_reference_kernels(kiln_session *s, int on)
{
    if (!s)
        return kiln_null_arg("kiln_session_set_reference_kernels", "session");
    s->exec.reference = on != 0;
    return KILN_OK;
}

kiln_status kiln_session_set_flush_denormals(kiln_session *s, int on)
{
    if (!s)
        return kiln_null_arg("kiln_session_set_flush_denormals", "session");
    s->exec.flush_denormals = on != 0;
    return KILN_OK;
}

kiln_status kiln_session_set_debug_stream(kiln_session *s, FILE *out)
{
    if (!s)
        return kiln_null_arg("kiln_session_set_debug_stream", "session");
    s->exec.debug = out;
    return KILN_OK;
}

kiln_status kiln_session_set_profiling(kiln_session *s, int on)
{
    if (kiln_session_begin(s, "kiln_session_set_profiling") != KILN_OK)
        return KILN_ERR_ARG;
    if (!on) {
        kiln_profile_free(s->exec.profile);
        s->exec.profile = NULL;
        s->profile_to_stderr = 0;
        return KILN_OK;
    }
    if (!s->exec.profile && !(s->exec.profile = kiln_profile_new()))
        return kiln_session_fail(s, KILN_ERR_MEMORY,
                                 "kiln_session_set_profiling: out of memory");
    return KILN_OK;
}

kiln_status kiln_session_print_profile(kiln_session *s, FILE *out)
{
    if (!s || !out)
        return kiln_null_arg("kiln_session_print_profile",
                             s ? "out" : "session");
    kiln_session_begin(s, "kiln_session_print_profile");
    if (!s->exec.profile)
        return kiln_session_fail(s, KILN_ERR_STATE,
                                 "kiln_session_print_profile: profiling is "
                                 "off (kiln_session_set_profiling)");
    kiln_profile_print(s->exec.profile, out);
    return KILN_OK;
}

long kiln_session_profile_calls(const kiln_session *s)
{
    return s && s->exec.profile ? kiln_profile_calls(s->exec.profile) : -1;
}
