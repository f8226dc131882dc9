#!/usr/bin/env bash
# Writes docs/benchmarks.md (to stdout) from the Go benchmark output and the
# pipeline section produced by e2e's TestPipelineBench. Run by `make bench`.
set -euo pipefail
go_out=$1
pipeline=$2
cat <<HDR
# Kingdom benchmarks

Produced by \`make bench\` on $(date -u +%Y-%m-%d) — the command runs
\`go test -run '^\$' -bench . -benchmem ./...\` and then
\`KINGDOM_BENCH=1 go test -run TestPipelineBench ./e2e/\` (real binaries, real tmux).

Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB RAM,
$(uname -sr), $(go version | cut -d' ' -f3-4), ext4 on a virtual disk. Figures vary with other load on the machine;
CPU-bound numbers are the ones to compare between runs.

HDR
if [ -s "$pipeline" ]; then
  cat "$pipeline"
  echo
fi
echo "### Go benchmarks"
echo
echo '```'
grep -E '^(Benchmark|pkg:|ok )' "$go_out" | grep -v '^ok ' || true
echo '```'
