#!/usr/bin/env bash
# Builds every fuzz target once, then runs each in turn for SECONDS (default 600) on its
# corpus in fuzz/corpus/<target>/; stops at the first crash and exits non-zero.
# Run with: fuzz/run.sh [SECONDS] [TARGET...]      (CI: fuzz/run.sh 15)
set -euo pipefail

cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(sse openai_stream anthropic_stream config agent_file spawn_args journal)
fi
# Longest input libFuzzer may make: room for a long stream, config or agent file.
declare -A max_len=(
    [sse]=8192 [openai_stream]=8192 [anthropic_stream]=8192
    [config]=8192 [agent_file]=16384 [spawn_args]=2048 [journal]=32768
)

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
# Builds must not overlap with other cargo runs on this machine (flock if present).
lock=()
if command -v flock >/dev/null; then
    lock=(flock /tmp/cargo.lock)
fi
# No sanitizer: warren denies unsafe code, and on stable only `-s none` avoids nightly
# `-Z` flags. cargo fuzz still builds with debug assertions and overflow checks.
"${lock[@]}" cargo fuzz build -s none
bin="target/$(rustc -vV | sed -n 's/^host: //p')/release"

for target in "${targets[@]}"; do
    len=${max_len[$target]:?unknown target $target}
    mkdir -p "corpus/$target" "artifacts/$target"
    log="artifacts/$target/last-run.log"
    status=0
    "$bin/$target" "corpus/$target" -max_total_time="$seconds" -max_len="$len" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="artifacts/$target/" >"$log" 2>&1 || status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    files=$(find "corpus/$target" -type f | wc -l)
    size=$(du -sh --apparent-size "corpus/$target" | cut -f1)
    echo "$target: ${seconds}s, ${execs:-?} execs, corpus $files files ($size)"
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$log"
        echo "$target: crash (exit $status); input and log in fuzz/artifacts/$target/" >&2
        exit 1
    fi
done
