#!/usr/bin/env bash
# The quick start (configs/bandit.yaml) cut to its warm-up and 10 iterations, on an idle machine with the
# automatic thread count, then with three busy-loop processes beside it (a machine already busy): the
# automatic count (1 thread on 2 cores), train.threads=2, and the automatic count again. Prints the warm-up's
# time and the median iteration for each, and the thread count each run chose.
#   bash bench/cpu_threads.sh
set -u
cd "$(dirname "$0")/.."
out=$(mktemp -d)
run() {
    label=$1; shift
    python ragen_mini.py --config configs/bandit.yaml train.iterations=10 eval.every=0 checkpoint.every=0 \
        run_dir="$out/$label" "$@" > "$out/$label.log" 2>&1
    python - "$out/$label" "$label" <<'PY'
import json, re, statistics, sys
run_dir, label = sys.argv[1:]
log = open(run_dir + ".log").read()
warmup = re.search(r"format warm-up: \d+ steps in (\d+) s", log).group(1)
rows = [json.loads(line) for line in open(run_dir + "/metrics.jsonl")]
median = statistics.median(row["perf/iteration_s"] for row in rows if "perf/iteration_s" in row)
threads = re.search(r"^CPU: .*$", log, re.M).group(0)
print(f"{label}: warm-up {warmup} s, iteration median {median:.2f} s; {threads}")
PY
    echo "  load $(cut -d' ' -f1-3 /proc/loadavg)"
}
run idle
burners=()
for _ in 1 2 3; do yes > /dev/null & burners+=($!); done
sleep 60  # the load average catches up
run busy_auto
run busy_2_threads train.threads=2
run busy_auto_again
kill "${burners[@]}"
rm -rf "$out"
