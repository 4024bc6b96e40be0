# record_machine FILE: the CPU and the instruction sets that decide bf16 vs float32, for a training
# run's folder (sourced by train_issue29.sh and ab_init_from_target.sh, not run).
record_machine() {
  lscpu | grep -E "Model name|^CPU\(s\)" > "$1"
  grep -o -w -E "avx2|avx512f|avx512_bf16|amx_tile" /proc/cpuinfo | sort | uniq -c >> "$1" || true
}
