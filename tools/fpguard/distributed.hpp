// check and plan under mpirun (docs/scale.md): each rank takes the input sets whose index
// is its rank modulo the number of ranks (the rule of check --shard), accumulates their
// analysis::CheckState, and the ranks exchange their states (mpi::allgather, as the partial
// JSON's states in CBOR) and merge them in rank order, so that every rank holds the same
// merged state. A rank whose work fails sends its error instead, and every rank then fails
// with the first such error: no rank waits for one that has stopped, and no MPI_Abort.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fpguard/analysis.hpp"
#include "fpguard/inputs.hpp"
#include "fpguard/model.hpp"
#include "fpguard/report.hpp"

namespace fpguard::cli::distributed {

// Runs `work` on this rank, then exchanges: every rank's bytes in rank order, or, when
// `work` threw on some rank, an Error (where, what as that rank's error) on every rank:
// the lowest such rank's.
std::vector<std::string> exchange(const std::function<std::string()>& work);

// `work`'s states (one per precision; none on a rank without input sets), merged over
// the ranks in rank order: the same states, to the bit, on every rank.
std::vector<analysis::CheckState> merged_states(
    const std::function<std::vector<analysis::CheckState>()>& work);

// This rank's input sets (index mod ranks == rank; none when there are fewer sets than
// ranks), listed, to be read one at a time, of --inputs DIR or of `samples` generated sets
// (each drawn with its index's seed, whichever rank draws it); and set 0, read, which every
// rank needs to finish a check or to plan.
struct RankSets {
  inputs::SetList own{};
  std::vector<NamedValue> first{};
  std::vector<inputs::Generated> generated{};  // set 0's, then those of the sets read
  std::size_t total = 0;
};
RankSets gather_rank_sets(const inputs::Options& in, const model::Model& m, std::size_t samples);

// `o` with the activation amax of a scaled precision calibrated over every rank's sets:
// each rank's maxima, exchanged, and their maximum (exact: the same on every rank, and what
// one process over all the sets calibrates). Collective; `o` as it is for other precisions.
analysis::CheckOptions calibrated(const model::Model& m, RankSets& sets, analysis::CheckOptions o);

// Progress on rank 0's terminal (silent elsewhere): its share's node steps (ranks advance
// at about the same pace) counted as sets of all ranks, with an ETA, and the ranks'
// threads (`threads`: --threads).
std::function<void(std::size_t, std::size_t)> progress(report::Progress& bar, const RankSets& sets,
                                                       int threads);

// check() over the sets of every rank: calibrate (a scaled precision), accumulate this
// rank's, merge, finish (every rank).
analysis::Diagnosis check(const model::Model& m, RankSets& sets, const analysis::CheckOptions& o);

}  // namespace fpguard::cli::distributed
