// The exchange of check states between the ranks of an mpirun job (distributed.hpp).
#include "distributed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <new>

#include "cli.hpp"
#include "fpguard/error.hpp"
#include "mpi.hpp"

namespace fpguard::cli::distributed {

namespace {

// A rank's message: 'S' and its result, or 'E' and its error as where '\0' what.
constexpr char kResult = 'S', kError = 'E';

std::string error_record(const std::string& where, const std::string& what) {
  return std::string(1, kError) + where + '\0' + what;
}

}  // namespace

std::vector<std::string> exchange(const std::function<std::string()>& work) {
  if (!mpi::world().distributed()) return {work()};  // errors as they are
  std::string mine;
  try {
    mine = kResult + work();
  } catch (const Error& e) {
    mine = error_record(where_of(e), problem_of(e));
  } catch (const std::bad_alloc&) {
    mine = error_record("rank " + std::to_string(mpi::world().rank), "out of memory");
  } catch (const std::exception& e) {
    mine = error_record("rank " + std::to_string(mpi::world().rank),
                        std::string("unexpected error: ") + e.what());
  }
  std::vector<std::string> all = mpi::allgather(mine);
  for (const auto& r : all)
    if (!r.empty() && r.front() == kError) {
      const auto zero = r.find('\0');
      throw Error(r.substr(1, zero - 1), r.substr(zero + 1));
    }
  for (auto& r : all) r.erase(0, 1);
  return all;
}

std::vector<analysis::CheckState> merged_states(
    const std::function<std::vector<analysis::CheckState>()>& work) {
  const auto all = exchange([&] { return report::to_cbor(work()); });
  std::vector<analysis::CheckState> merged;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::string where = "rank " + std::to_string(r);
    auto states = report::check_states_from_cbor(all[r], where);
    if (states.empty()) continue;  // no input sets on that rank
    if (merged.empty()) {
      merged = std::move(states);
      continue;
    }
    if (states.size() != merged.size())
      throw Error(where, "sent states of another check (" + std::to_string(states.size()) +
                             " precisions, not " + std::to_string(merged.size()) + ")");
    for (std::size_t k = 0; k < states.size(); ++k) analysis::merge(merged[k], states[k]);
  }
  return merged;
}

RankSets gather_rank_sets(const inputs::Options& in, const model::Model& m, std::size_t samples) {
  const auto& w = mpi::world();
  RankSets r;
  const inputs::SetList all = inputs::list_samples(in, m, samples);
  r.total = all.total;
  r.first = all.read(0, &r.generated);
  if (std::size_t(w.rank) < r.total)
    r.own = inputs::list_samples(in, m, samples,
                                 {.index = std::size_t(w.rank), .count = std::size_t(w.size)});
  return r;
}

analysis::CheckOptions calibrated(const model::Model& m, RankSets& sets, analysis::CheckOptions o) {
  if (!o.scaled || o.scaled->rule != ScaleRule::amax || o.activation_amax) return o;
  const auto all = exchange([&] {
    report::Json j = report::Json::array();
    if (sets.own.size() != 0)
      for (const auto& [key, a] : analysis::calibrate(m, analysis::read_lazily(sets.own), o))
        j.push_back(report::Json::array({key.first, key.second, a}));
    const std::vector<std::uint8_t> cbor = report::Json::to_cbor(j);
    return std::string(cbor.begin(), cbor.end());
  });
  analysis::ActivationAmax amax;
  for (const auto& bytes : all)
    for (const auto& e : report::Json::from_cbor(bytes))
      analysis::max_amax(
          amax, {{{e[0].get<std::string>(), e[1].get<std::size_t>()}, e[2].get<double>()}});
  o.activation_amax = std::move(amax);
  return o;
}

namespace {

// "2 threads", "1-2 threads": the ranks' thread counts, `threads` (--threads) or each
// rank's default (mpi::World::cores).
std::string threads_of_ranks(int threads) {
  const auto& cores = mpi::world().cores;
  const auto [low, high] = std::minmax_element(cores.begin(), cores.end());
  const int lo = threads > 0 ? threads : (cores.empty() ? 1 : *low);
  const int hi = threads > 0 ? threads : (cores.empty() ? 1 : *high);
  const std::string n = lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi);
  return n + (hi == 1 ? " thread" : " threads");
}

}  // namespace

std::function<void(std::size_t, std::size_t)> progress(report::Progress& bar, const RankSets& sets,
                                                       int threads) {
  const std::size_t ranks = std::size_t(mpi::world().size), own = sets.own.size();
  const std::size_t total = sets.total;
  const std::string each = threads_of_ranks(threads);
  return [&bar, ranks, own, total, each](std::size_t done, std::size_t steps) {
    const std::size_t sets_done = own ? std::min(total, done * own / steps * ranks) : 0;
    bar.update(done, steps,
               fmt::format("{}/{} sets on {} ranks x {}", sets_done, total, ranks, each));
  };
}

analysis::Diagnosis check(const model::Model& m, RankSets& sets, const analysis::CheckOptions& o) {
  const analysis::CheckOptions c = calibrated(m, sets, o);
  auto merged = merged_states([&] {
    if (sets.own.size() == 0) return std::vector<analysis::CheckState>{};
    return std::vector{analysis::accumulate(m, analysis::read_lazily(sets.own, &sets.generated), c,
                                            sets.own.indices)};
  });
  return analysis::finish(m, std::move(merged.front()), c, [&] { return sets.first; });
}

}  // namespace fpguard::cli::distributed
