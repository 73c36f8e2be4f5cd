// Writes the matrices of one gemm-error experiment as float64 .npy files (a, b,
// a_rounded, b_rounded, c, c_ref, c_ref_unrounded, abs_ab, input_bound when there is one)
// into a directory and prints its setup and table row as JSON, so that
// tests/reference/experiments_test.py can check every step with NumPy, torch and exact
// rationals.
//
//   gemm_dump OUT_DIR N FORMAT ACCUMULATE OUTPUT ACCUMULATION DISTRIBUTION SEED SAMPLE
//   (FORMAT scalar or scaled, ACCUMULATE/OUTPUT may be "same", ACCUMULATION "auto")
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "fpguard/error.hpp"
#include "fpguard/experiments.hpp"
#include "fpguard/tensor.hpp"

namespace {

void save(const std::string& dir, const char* name, const std::vector<double>& x, std::int64_t n) {
  fpguard::Tensor t(fpguard::DType::float64, {n, n});
  std::copy(x.begin(), x.end(), t.data<double>().begin());
  fpguard::write_npy(dir + "/" + name + ".npy", t);
}

nlohmann::json number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 10) {
    std::fprintf(stderr,
                 "usage: gemm_dump OUT_DIR N FORMAT ACCUMULATE OUTPUT ACCUMULATION DISTRIBUTION "
                 "SEED SAMPLE\n");
    return 2;
  }
  try {
    const std::string dir = argv[1];
    const std::int64_t n = std::stoll(argv[2]);
    const auto setup = fpguard::make_gemm_setup(
        fpguard::parse_any_format(argv[3]), fpguard::parse_format_or_same(argv[4]),
        fpguard::parse_format_or_same(argv[5]), fpguard::parse_accumulation_order(argv[6]));
    const auto dist = fpguard::parse_distribution(argv[7]);
    const auto m = fpguard::gemm_matrices(n, setup, dist, std::stoull(argv[8]), std::stoi(argv[9]));
    save(dir, "a", m.a, n);
    save(dir, "b", m.b, n);
    save(dir, "a_rounded", m.a_rounded, n);
    save(dir, "b_rounded", m.b_rounded, n);
    save(dir, "c", m.c, n);
    save(dir, "c_ref", m.c_ref, n);
    save(dir, "c_ref_unrounded", m.c_ref_unrounded, n);
    save(dir, "abs_ab", m.abs_ab, n);
    if (!m.input_bound.empty()) save(dir, "input_bound", m.input_bound, n);
    const auto r = fpguard::gemm_error_row(m, setup);
    nlohmann::json j;
    j["format"] = r.format;
    j["accumulate"] = r.accumulate;
    j["accumulation"] = r.accumulation;
    j["output"] = r.output;
    j["mean_abs_error"] = number(r.mean_abs_error);
    j["max_abs_error"] = number(r.max_abs_error);
    j["max_rel_error"] = number(r.max_rel_error);
    j["normwise_error"] = number(r.normwise_error);
    j["input_rounding_error"] = number(r.input_rounding_error);
    j["input_rounding_bound"] = number(r.input_rounding_bound);
    j["bound_deterministic"] = number(r.bound_deterministic);
    j["bound_probabilistic"] = number(r.bound_probabilistic);
    j["rel_floor"] = number(r.rel_floor);
    j["overflow"] = r.overflow;
    j["bound_violations"] =
        r.bound_violations ? nlohmann::json(*r.bound_violations) : nlohmann::json();
    j["input_bound_violations"] =
        r.input_bound_violations ? nlohmann::json(*r.input_bound_violations) : nlohmann::json();
    std::cout << j.dump() << "\n";
  } catch (const fpguard::Error& e) {
    std::fprintf(stderr, "gemm_dump: %s\n", e.what());
    return 2;
  }
  return 0;
}
