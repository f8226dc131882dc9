#!/usr/bin/env bash
# Writes docs/benchmarks.md (to stdout) from the Go benchmark output and the
# sections e2e's TestSpeedBench and TestPipelineBench wrote. Run by
# `make bench`, which sets KINGDOM_BENCH_DISK to the disk it ran on.
set -euo pipefail
go_out=$1
pipeline=$2
speed=${3:-}

# metric NAME UNIT: the value printed before UNIT on the benchmark line whose
# name starts with NAME (first match), or "-".
metric() {
  awk -v name="$1" -v unit="$2" '
    index($1, name) == 1 { for (i = 2; i <= NF; i++) if ($i == unit) { print $(i-1); exit } }
  ' "$go_out" | head -1 | grep . || echo -
}
us() { awk -v v="$1" 'BEGIN { if (v == "-") print "-"; else printf "%.0f", v / 1e3 }'; }
ms() { awk -v v="$1" 'BEGIN { if (v == "-") print "-"; else printf "%.1f", v / 1e6 }'; }
cat <<HDR
# Kingdom benchmarks

Produced by \`make bench\` on $(date -u +%Y-%m-%d): \`go test -bench . ./...\`, then
\`KINGDOM_BENCH=1 go test -run 'TestPipelineBench|TestSpeedBench' ./e2e/\` (real binaries, real tmux).

**Disk:** ${KINGDOM_BENCH_DISK:-the current disk (not named)}. \`make bench\` runs on an ordinary
journaled filesystem: as root it makes a fresh ext4 image with mkfs's defaults and loop-mounts it;
otherwise it runs on the current disk. Compare figures only between runs on the same kind of disk.

Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB RAM,
$(uname -sr), $(go version | cut -d' ' -f3-4). Figures vary with other load on the machine; CPU
figures are the ones to compare between runs.

What a user feels: the time from an event to its task and to its ✅, the CPU Kingdom adds to an
agent run (beside the agent CLI's own), the cost of a growing backlog, and idle cost. Real load is
a few soldiers at once and tasks that last minutes.

HDR
if [ -n "$speed" ] && [ -s "$speed" ]; then
  cat "$speed"
  echo
fi
cat <<TBL
### Disk limits (Go benchmarks, this run)

| limit | per operation |
|---|---|
| fsync of a small file | $(us "$(metric BenchmarkLimit_Fsync ns/op)") µs |
| create + write + close of a small file | $(us "$(metric BenchmarkLimit_Create ns/op)") µs |
| rename in one directory | $(us "$(metric BenchmarkLimit_Rename ns/op)") µs |
| durable put, one at a time (temp, fsync, rename, dir fsync) | $(us "$(metric BenchmarkLimit_DurablePut ns/op)") µs |
| durable put in a group commit of 100 | $(metric BenchmarkLimit_GroupPut100 µs/file) µs/file |

### Backlog growth

| figure | measured |
|---|---|
| king tick with 100 events waiting (one new per tick) | $(metric BenchmarkKing_BacklogTick/100- tick-ms) ms ($(metric BenchmarkKing_BacklogTick/100- tick-cpu-ms) CPU-ms) |
| king tick with 1,000 events waiting | $(metric BenchmarkKing_BacklogTick/1000- tick-ms) ms ($(metric BenchmarkKing_BacklogTick/1000- tick-cpu-ms) CPU-ms); a cache would be justified above 100 ms |
| king dispatch, 1,000 pending in one tick | $(metric BenchmarkKing_OneTick/1000- events/s) events/s |
| envoy delivery, 10 / 100 / 1,000 pending (CPU per message) | $(metric BenchmarkDeliverBacklog/10- cpu-ms/msg) / $(metric BenchmarkDeliverBacklog/100- cpu-ms/msg) / $(metric BenchmarkDeliverBacklog/1000- cpu-ms/msg) ms |
| chamberlain: 100k-line events.log from zero | $(ms "$(metric BenchmarkConsume_100kFromZero ns/op)") ms |

TBL
if [ -s "$pipeline" ]; then
  cat "$pipeline"
  echo
fi
echo "### Go benchmarks"
echo
echo '```'
grep -E '^(Benchmark|pkg:|ok )' "$go_out" | grep -v '^ok ' || true
echo '```'
