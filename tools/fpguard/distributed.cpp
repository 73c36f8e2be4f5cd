// The exchange of check states between the ranks of an mpirun job (distributed.hpp).
#include "distributed.hpp"

#include <fmt/format.h>

#include <limits>
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
    mine = error_record(where_of(e), e.problem());
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
  const auto all = exchange([&] {
    report::Json states = report::Json::array();
    for (const auto& s : work()) states.push_back(report::to_json(s));
    const std::vector<std::uint8_t> cbor = report::Json::to_cbor(states);
    return std::string(cbor.begin(), cbor.end());
  });
  std::vector<analysis::CheckState> merged;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::string where = "rank " + std::to_string(r);
    const report::Json states = report::Json::from_cbor(all[r]);
    if (states.empty()) continue;  // no input sets on that rank
    if (merged.empty()) {
      for (const auto& s : states) merged.push_back(report::check_state_from_json(s, where));
      continue;
    }
    if (states.size() != merged.size())
      throw Error(where, "sent states of another check (" + std::to_string(states.size()) +
                             " precisions, not " + std::to_string(merged.size()) + ")");
    for (std::size_t k = 0; k < states.size(); ++k)
      analysis::merge(merged[k], report::check_state_from_json(states[k], where));
  }
  return merged;
}

RankSets gather_rank_sets(const inputs::Options& in, const model::Model& m) {
  const auto& w = mpi::world();
  const auto every = std::numeric_limits<std::size_t>::max();
  RankSets r;
  try {
    if (w.root()) {
      r.own = inputs::gather_samples(in, m, 1, {.index = 0, .count = std::size_t(w.size)});
      r.first = r.own.sets.front();
      r.total = r.own.total;
    } else {
      // Set 0 alone (shard 0 of as many as there could be sets), then this rank's.
      const auto head = inputs::gather_samples(in, m, 1, {.index = 0, .count = every});
      r.first = head.sets.front();
      r.total = head.total;
      r.generated = head.generated;
      if (std::size_t(w.rank) < r.total)
        r.own = inputs::gather_samples(
            in, m, 1, {.index = std::size_t(w.rank), .count = std::size_t(w.size)});
    }
  } catch (const Error& e) {
    if (e.option() != "shard") throw;
    throw Error("mpirun",
                "the ranks share the input sets of --inputs DIR, a directory with "
                "one subdirectory or .npz file per set");
  }
  if (!r.own.sets.empty()) r.generated = r.own.generated;
  return r;
}

std::function<void(std::size_t, std::size_t)> progress(report::Progress& bar,
                                                       const RankSets& sets) {
  const std::size_t ranks = std::size_t(mpi::world().size), own = sets.own.sets.size();
  const std::size_t total = sets.total;
  return [&bar, ranks, own, total](std::size_t done, std::size_t steps) {
    const std::size_t sets_done = own ? std::min(total, done * own / steps * ranks) : 0;
    bar.update(done, steps, fmt::format("{}/{} sets on {} ranks", sets_done, total, ranks));
  };
}

analysis::Diagnosis check(const model::Model& m, const RankSets& sets,
                          const analysis::CheckOptions& o) {
  auto merged = merged_states([&] {
    if (sets.own.sets.empty()) return std::vector<analysis::CheckState>{};
    return std::vector{analysis::accumulate(m, sets.own.sets, o, sets.own.indices)};
  });
  return analysis::finish(m, std::move(merged.front()), o, [&] { return sets.first; });
}

}  // namespace fpguard::cli::distributed
