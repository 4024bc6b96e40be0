# record_machine README: appends a "## Machine" section to a training run's README.md (the CPU and
# the instruction sets that decide bf16 vs float32), once: a resumed run leaves it as it is.
# Sourced by train_issue29.sh and ab_init_from_target.sh, not run.
record_machine() {
  grep -q "^## Machine" "$1" 2>/dev/null && return 0
  {
    printf '\n## Machine\n\n```\n'
    lscpu | grep -E "Model name|^CPU\(s\)"
    grep -o -w -E "avx2|avx512f|avx512_bf16|amx_tile" /proc/cpuinfo | sort | uniq -c || true
    printf '```\n'
  } >> "$1"
}
