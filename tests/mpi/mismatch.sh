# Sourced by the MPI test scripts, which set tmp and mpirun and define
# fail.  expect_mismatch NAME PATTERN SCRIPT runs SCRIPT (sh -c; a rank
# picks its own arguments from OMPI_COMM_WORLD_RANK) on 2 ranks and checks
# that the job fails, not by the timeout, with the start-up check's
# message 'rank 1 differs from rank 0: ' and PATTERN printed by both
# ranks (NAME.out and NAME.err in $tmp).
expect_mismatch() {
    timeout 120 "$mpirun" -np 2 sh -c "$3" >"$tmp/$1.out" 2>"$tmp/$1.err" </dev/null
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "$1: status $rc"
    for r in 0 1; do
        grep -q "kiln: rank $r: .*rank 1 differs from rank 0: $2" "$tmp/$1.err" ||
            fail "$1: no error from rank $r"
    done
}
