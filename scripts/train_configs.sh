# The training configs that scripts/train_speed.sh and scripts/train_ablation.sh compare, and the
# machine facts both record (sourced, not run). Each entry: "name|extra trainer flags".
TRAIN_CONFIGS=(
  "bf16-full|"
  "bf16-vocab8k|--head-vocab 8192"
  "f32-full|--no-amp --target-dtype float32"
  "f32-vocab8k|--no-amp --target-dtype float32 --head-vocab 8192"
  "f32-vocab8k-a128|--no-amp --target-dtype float32 --head-vocab 8192 --anchors 128 --batch 2"
  "f32-vocab8k-3layers|--no-amp --target-dtype float32 --head-vocab 8192 --layers 3"
)

record_machine() {   # record_machine FILE: the CPU and the instruction sets that decide bf16 vs float32
  lscpu | grep -E "Model name|^CPU\(s\)" > "$1"
  grep -o -w -E "avx2|avx512f|avx512_bf16|amx_tile" /proc/cpuinfo | sort | uniq -c >> "$1" || true
}
