// Which floating-point formats each accelerator generation computes in natively: a data
// table, one row per generation, each with the documents its facts come from. Formats are
// canonical fpguard names (checked by the tests). "Matrix" means the units that do the
// heavy lifting of a GEMM (NVIDIA tensor cores, AMD MFMA matrix cores, Intel AMX tiles,
// Arm BFMMLA); "vector" the ordinary SIMD/CUDA-core arithmetic.
//
// Where a fact is less certain it says so in `notes` rather than being left out silently.
// Common mistakes this table corrects: bf16 tensor cores need sm_80 or newer (Turing and
// Volta convert bf16 to fp32); fp8 tensor cores need sm_89 (Ada) or newer, not sm_80/86;
// the fnuz FP8 variants are AMD CDNA3's (MI300), not NVIDIA's, which use OCP e4m3fn/e5m2.
#include <algorithm>
#include <cctype>
#include <string>

#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"

namespace fpguard {

namespace {

constexpr const char* kNvidiaSources =
    "CUDA C++ Programming Guide, 'Warp Matrix Functions' (element types per compute "
    "capability); PTX ISA, 'Warp-level Matrix Multiply-Accumulate Instructions' (mma "
    "types and their required sm_XX)";

std::vector<Target> make_targets() {
  std::vector<Target> t;
  // ---- NVIDIA ------------------------------------------------------------------------
  t.push_back(
      {.name = "sm_70",
       .aliases = {"volta", "v100"},
       .vendor = "NVIDIA",
       .products = "V100 (Volta)",
       .matrix_formats = {"float16"},
       .vector_formats = {"float32", "float64", "float16"},
       .integer_formats = {},
       .recommended = "float16",
       .fastest = "float16",
       .notes = "First tensor cores: fp16 inputs, fp16 or fp32 accumulation. No bf16 (converted "
                "to fp32), no int8 tensor cores (int8 wmma starts at sm_72).",
       .sources = std::string(kNvidiaSources) + "; NVIDIA Tesla V100 GPU Architecture whitepaper"});
  t.push_back(
      {.name = "sm_75",
       .aliases = {"turing", "t4", "rtx2080", "rtx-20"},
       .vendor = "NVIDIA",
       .products = "T4, RTX 20 series, Quadro RTX (Turing)",
       .matrix_formats = {"float16"},
       .vector_formats = {"float32", "float64", "float16"},
       .integer_formats = {"int8", "int4"},
       .recommended = "float16",
       .fastest = "float16",
       .notes = "Tensor cores: fp16 and int8/int4 (sub-byte wmma is 'experimental' in CUDA). No "
                "bf16 or tf32 tensor cores: bf16 is converted to fp32.",
       .sources = std::string(kNvidiaSources) + "; NVIDIA Turing GPU Architecture whitepaper"});
  t.push_back({.name = "sm_80",
               .aliases = {"ampere", "a100", "a30"},
               .vendor = "NVIDIA",
               .products = "A100, A30 (GA100)",
               .matrix_formats = {"float16", "bfloat16", "tf32", "float64"},
               .vector_formats = {"float32", "float64", "float16", "bfloat16"},
               .integer_formats = {"int8", "int4"},
               .recommended = "bfloat16",
               .fastest = "float16",
               .notes =
                   "Adds bf16 and tf32 tensor cores and fp64 tensor cores (DMMA). tf32 is what "
                   "'fp32' convolutions and GEMMs run in when the framework allows it (PyTorch: "
                   "cuDNN convolutions by default, matmuls opt-in since 1.12). No fp8: fp8 tensor "
                   "cores start at sm_89.",
               .sources = std::string(kNvidiaSources) +
                          "; NVIDIA A100 Tensor Core GPU Architecture whitepaper"});
  t.push_back(
      {.name = "sm_86",
       .aliases = {"a10", "a40", "a16", "a2", "rtx3090", "rtx-30", "ga102"},
       .vendor = "NVIDIA",
       .products = "A10, A40, RTX 30 series, RTX A-series (GA10x)",
       .matrix_formats = {"float16", "bfloat16", "tf32"},
       .vector_formats = {"float32", "float64", "float16", "bfloat16"},
       .integer_formats = {"int8", "int4"},
       .recommended = "bfloat16",
       .fastest = "float16",
       .notes = "Same tensor-core formats as sm_80 for fp16/bf16/tf32/int8. No fp8. GA10x has no "
                "fp64 tensor-core throughput (fp64 runs at 1/64 rate) and is not listed here. "
                "GeForce parts run fp16 with fp32 accumulation at half the fp16-accumulate rate.",
       .sources = std::string(kNvidiaSources) +
                  "; NVIDIA Ampere GA102 GPU Architecture whitepaper (tensor-core rate tables)"});
  t.push_back(
      {.name = "sm_89",
       .aliases = {"ada", "l4", "l40", "l40s", "rtx4090", "rtx-40"},
       .vendor = "NVIDIA",
       .products = "L4, L40, L40S, RTX 40 series (Ada Lovelace)",
       .matrix_formats = {"float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2"},
       .vector_formats = {"float32", "float64", "float16", "bfloat16"},
       .integer_formats = {"int8", "int4"},
       .recommended = "bfloat16",
       .fastest = "float8_e4m3fn",
       .notes = "First generation with fp8 tensor cores (OCP e4m3fn and e5m2; library support "
                "arrived with CUDA 12 — check your version). fp8 "
                "needs per-tensor scales: check them with `fpguard inspect`. GeForce parts run "
                "fp16/fp8 with fp32 accumulation at half rate.",
       .sources = std::string(kNvidiaSources) +
                  " (mma .e4m3/.e5m2 require sm_89); NVIDIA Ada GPU Architecture whitepaper"});
  t.push_back(
      {.name = "sm_90",
       .aliases = {"hopper", "h100", "h200", "h800", "gh200"},
       .vendor = "NVIDIA",
       .products = "H100, H200, GH200 (Hopper)",
       .matrix_formats = {"float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2", "float64"},
       .vector_formats = {"float32", "float64", "float16", "bfloat16"},
       .integer_formats = {"int8"},
       .recommended = "bfloat16",
       .fastest = "float8_e4m3fn",
       .notes = "fp8 (e4m3fn, e5m2) tensor cores via wgmma; int4 tensor cores were dropped. "
                "Reported (DeepSeek-V3 technical report, 2024, sec. 3.3.2, not an NVIDIA "
                "document): fp8 GEMMs keep only ~14 bits in the tensor-core accumulator, which "
                "is why fp8 kernels promote partial sums to fp32 every 128 products — modelled by "
                "accumulation in e8m13 with blocked:128 order (docs/experiments.md).",
       .sources =
           std::string(kNvidiaSources) + "; NVIDIA H100 Tensor Core GPU Architecture whitepaper"});
  t.push_back(
      {.name = "sm_100",
       .aliases = {"blackwell", "b200", "b100", "gb200"},
       .vendor = "NVIDIA",
       .products = "B200, B100, GB200 (Blackwell data centre)",
       .matrix_formats = {"float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2",
                          "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float64"},
       .vector_formats = {"float32", "float64", "float16", "bfloat16"},
       .integer_formats = {"int8"},
       .recommended = "bfloat16",
       .fastest = "float4_e2m1fn",
       .notes = "Adds fp6 and fp4 (OCP MX element formats) to fp8, with hardware block scaling: "
                "e8m0 scales per 32 elements (MXFP8/6/4) or e4m3 scales per 16 (NVFP4) — fp4 and "
                "fp6 are only usable with such scales. tcgen05 instructions (sm_100a).",
       .sources = std::string(kNvidiaSources) +
                  " (tcgen05.mma kinds f8f6f4, mxf8f6f4, mxf4, mxf4nvf4); NVIDIA Blackwell "
                  "architecture technical brief"});
  t.back().scaled_formats = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2",
                             "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4"};
  t.push_back({.name = "sm_120",
               .aliases = {"rtx5090", "rtx-50", "rtx-pro-6000", "gb202"},
               .vendor = "NVIDIA",
               .products = "RTX 50 series, RTX PRO Blackwell (GB20x)",
               .matrix_formats = {"float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2",
                                  "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"},
               .vector_formats = {"float32", "float64", "float16", "bfloat16"},
               .integer_formats = {"int8"},
               .recommended = "bfloat16",
               .fastest = "float4_e2m1fn",
               .notes =
                   "Consumer Blackwell: fp4/fp6/fp8 with block scales through mma.sync "
                   "(kind::f8f6f4, mxf8f6f4, mxf4nvf4 on sm_120a), not tcgen05. No fp64 tensor "
                   "cores. The exact per-kind coverage on sm_120 is from the PTX ISA tables; "
                   "check your CUDA version's release notes.",
               .sources = std::string(kNvidiaSources) +
                          "; NVIDIA RTX Blackwell GPU Architecture whitepaper"});
  t.back().scaled_formats = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2",
                             "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4"};
  // ---- AMD ---------------------------------------------------------------------------
  t.push_back({.name = "cdna2",
               .aliases = {"mi200", "mi250", "mi250x", "mi210", "gfx90a"},
               .vendor = "AMD",
               .products = "Instinct MI200 series (gfx90a)",
               .matrix_formats = {"float64", "float32", "float16", "bfloat16"},
               .vector_formats = {"float32", "float64", "float16", "bfloat16"},
               .integer_formats = {"int8"},
               .recommended = "bfloat16",
               .fastest = "float16",
               .notes = "MFMA matrix cores run fp64, fp32, fp16 and bf16 (full-rate '_1k' bf16 "
                        "instructions). No fp8 and no tf32.",
               .sources =
                   "AMD Instinct MI200 Instruction Set Architecture reference guide (V_MFMA_* "
                   "opcodes); AMD CDNA 2 architecture whitepaper"});
  t.push_back({.name = "cdna3",
               .aliases = {"mi300", "mi300x", "mi300a", "mi325x", "gfx942"},
               .vendor = "AMD",
               .products = "Instinct MI300X, MI300A, MI325X (gfx942)",
               .matrix_formats = {"float64", "float32", "tf32", "float16", "bfloat16",
                                  "float8_e4m3fnuz", "float8_e5m2fnuz"},
               .vector_formats = {"float32", "float64", "float16", "bfloat16"},
               .integer_formats = {"int8"},
               .recommended = "bfloat16",
               .fastest = "float8_e4m3fnuz",
               .notes =
                   "fp8 matrix cores use the fnuz encodings (AMD 'FP8'/'BF8': bias 8/16, one NaN "
                   "code 0x80, no inf, no -0), not NVIDIA's OCP e4m3fn/e5m2: an e4m3fn model must "
                   "be converted (max 240, not 448). tf32 is AMD's XF32 (same 1-8-10 layout).",
               .sources = "AMD Instinct MI300 Instruction Set Architecture reference guide "
                          "(V_MFMA_F32_*_FP8_FP8/BF8, V_MFMA_F32_*_XF32); AMD CDNA 3 architecture "
                          "whitepaper"});
  t.push_back(
      {.name = "cdna4",
       .aliases = {"mi350", "mi350x", "mi355x", "gfx950"},
       .vendor = "AMD",
       .products = "Instinct MI350X, MI355X (gfx950)",
       .matrix_formats = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn",
                          "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"},
       .vector_formats = {"float32", "float64", "float16", "bfloat16"},
       .integer_formats = {"int8"},
       .recommended = "bfloat16",
       .fastest = "float4_e2m1fn",
       .notes = "Moves fp8 to the OCP encodings (e4m3fn, e5m2) and adds MX fp6/fp4 with e8m0 "
                "block scales; XF32 was removed. Less widely documented than CDNA3: check the "
                "ISA guide of your ROCm release.",
       .sources = "AMD CDNA 4 architecture whitepaper (2025); AMD Instinct MI350 series ISA "
                  "reference guide"});
  t.back().scaled_formats = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1"};
  // ---- Intel -------------------------------------------------------------------------
  t.push_back(
      {.name = "sapphire-rapids",
       .aliases = {"spr", "emerald-rapids", "emr", "xeon-4th-gen"},
       .vendor = "Intel",
       .products = "4th/5th gen Xeon Scalable (Sapphire Rapids, Emerald Rapids)",
       .matrix_formats = {"bfloat16"},
       .vector_formats = {"float32", "float64", "float16", "bfloat16"},
       .integer_formats = {"int8"},
       .recommended = "bfloat16",
       .fastest = "bfloat16",
       .notes = "AMX tiles multiply bf16 (TDPBF16PS, fp32 accumulation) and int8. AVX512-FP16 "
                "gives full fp16 vector arithmetic; AVX512_BF16 gives bf16 dot products into "
                "fp32 (VDPBF16PS). No fp16 in AMX until Granite Rapids.",
       .sources = "Intel Architecture Instruction Set Extensions Programming Reference (AMX-BF16, "
                  "AMX-INT8, AVX512-FP16, AVX512_BF16); Intel 64 and IA-32 Architectures "
                  "Optimization Reference Manual"});
  t.push_back(
      {.name = "granite-rapids",
       .aliases = {"gnr", "xeon-6"},
       .vendor = "Intel",
       .products = "Xeon 6 P-core (Granite Rapids)",
       .matrix_formats = {"bfloat16", "float16"},
       .vector_formats = {"float32", "float64", "float16", "bfloat16"},
       .integer_formats = {"int8"},
       .recommended = "bfloat16",
       .fastest = "bfloat16",
       .notes = "Adds AMX-FP16 (TDPFP16PS: fp16 tiles, fp32 accumulation) to AMX-BF16/INT8.",
       .sources =
           "Intel Architecture Instruction Set Extensions Programming Reference (AMX-FP16)"});
  // ---- Arm ---------------------------------------------------------------------------
  t.push_back(
      {.name = "armv8.2-fp16",
       .aliases = {"armv8.2", "neoverse-n1", "graviton2", "cortex-a76"},
       .vendor = "Arm",
       .products = "Armv8.2-A cores with FEAT_FP16 (Neoverse N1 / Graviton2, Cortex-A76, ...)",
       .matrix_formats = {},
       .vector_formats = {"float32", "float64", "float16"},
       .integer_formats = {"int8"},
       .recommended = "float16",
       .fastest = "float16",
       .notes = "FEAT_FP16 (optional from Armv8.2) gives fp16 vector arithmetic (FMLA .8H); "
                "there is no matrix unit and no bf16. int8 via SDOT (FEAT_DotProd).",
       .sources = "Arm Architecture Reference Manual for A-profile (FEAT_FP16, FEAT_DotProd); Arm "
                  "Neoverse N1 technical reference manual"});
  t.push_back(
      {.name = "armv8.6-bf16",
       .aliases = {"armv8.6", "neoverse-v1", "graviton3", "neoverse-v2", "graviton4", "grace"},
       .vendor = "Arm",
       .products = "Armv8.6-A and later with FEAT_BF16 (Neoverse V1/V2: Graviton3/4, Grace, ...)",
       .matrix_formats = {"bfloat16"},
       .vector_formats = {"float32", "float64", "float16", "bfloat16"},
       .integer_formats = {"int8"},
       .recommended = "bfloat16",
       .fastest = "bfloat16",
       .notes = "FEAT_BF16 (mandatory from Armv8.6) adds BFMMLA, a 2x4 by 4x2 bf16 matrix "
                "multiply into fp32, and BFDOT; FEAT_I8MM adds int8 SMMLA. Neoverse V1 is "
                "Armv8.4 with BF16 and I8MM added, so it is listed here by its features.",
       .sources = "Arm Architecture Reference Manual for A-profile (FEAT_BF16, FEAT_I8MM); Arm "
                  "Neoverse V1 technical reference manual"});
  return t;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> table = make_targets();
  return table;
}

const Target& find_target(std::string_view name) {
  const std::string key = lower(name);
  std::vector<std::string> names;
  for (const auto& t : targets()) {
    if (key == t.name) return t;
    for (const auto& a : t.aliases)
      if (key == a) return t;
    names.push_back(t.name);
    for (const auto& a : t.aliases) names.push_back(a);
  }
  // sm80, SM_80, compute_80 and sm_80a all mean sm_80.
  std::string k = key;
  if (k.rfind("compute_", 0) == 0) k = "sm_" + k.substr(8);
  if (k.rfind("sm", 0) == 0 && k.size() > 2 && k[2] != '_') k = "sm_" + k.substr(2);
  if (!k.empty() && k.back() == 'a' && k.rfind("sm_", 0) == 0) k.pop_back();
  if (k != key)
    for (const auto& t : targets())
      if (k == t.name) return t;
  std::string msg = "unknown target";
  if (auto hint = did_you_mean(key, names); !hint.empty())
    msg += "; did you mean '" + hint + "'?";
  else
    msg += " (see `fpguard targets` for the list)";
  throw Error("target '" + std::string(name) + "'", msg);
}

bool runs_in_matrix_units(const Target& t, const Format& f) {
  return contains(t.matrix_formats, f.name);
}

bool runs_natively(const Target& t, const Format& f) {
  return contains(t.matrix_formats, f.name) || contains(t.vector_formats, f.name);
}

bool runs_natively(const Target& t, const ScaledFormat& f) {
  if (f.scope != ScaleScope::block) return runs_in_matrix_units(t, f.element);
  return std::find(t.scaled_formats.begin(), t.scaled_formats.end(), f.name) !=
         t.scaled_formats.end();
}

Format recommended_format(const Target& t) {
  return parse_format(t.recommended);
}

void require_native(const Target& t, const Format& f) {
  if (runs_natively(t, f)) return;
  throw Error::in_option("target", t.name,
                         t.name + " (" + t.products + ") does not compute in " + f.name +
                             " natively; its matrix units run " + join(t.matrix_formats) +
                             "; recommended: " + t.recommended);
}

void require_native(const Target& t, const ScaledFormat& f) {
  if (f.scope != ScaleScope::block) return require_native(t, f.element);
  if (runs_natively(t, f)) return;
  throw Error::in_option(
      "target", t.name,
      t.name + " (" + t.products + ") does not run the block format " + f.name +
          " natively; its matrix units run " +
          (t.scaled_formats.empty() ? std::string("no block format") : join(t.scaled_formats)) +
          "; recommended: " + t.recommended);
}

}  // namespace fpguard
