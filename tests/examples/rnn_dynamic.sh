#!/bin/sh
# LSTM and GRU cells unrolled on the dynamic path over batches of bit
# strings of 1 to 10 bits (counting the ones): for each cell the mean loss
# of the last 30 steps is below a quarter of the first 30's, and fresh
# batches are counted right at least 90% of the time.
out=$("$1/examples/rnn_dynamic") || { printf '%s\n' "$out"; exit 1; }
printf '%s\n' "$out"
for cell in lstm gru; do
    line=$(printf '%s\n' "$out" | grep "^$cell: mean loss") || { echo "no summary for $cell"; exit 1; }
    printf '%s\n' "$line" | awk '{
        first = $9; sub(/,$/, "", first); last = $14; sub(/;$/, "", last); acc = $16
        if (!(last < first / 4 && acc >= 0.9)) { print "loss did not fall enough: " $0; exit 1 }
    }' || exit 1
done
