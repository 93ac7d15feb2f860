// Which dataset each sample of a weighted mixture comes from: a deterministic interleaving with
// a proven bound, so that the realised proportions match the weights at every point of the run,
// not only on average.
//
// The weights are normalised and quantised to integers m_i summing to M = 2^32 (w_i = m_i / M;
// the quantisation moves a weight by less than 2^-32). Sample n (0-based) fills slot t = n + 1.
// The j-th sample of dataset i may take a slot in the window
//     release = floor((j - 1) / w_i) + 1  ...  deadline = ceil(j / w_i),
// and each slot goes to the dataset whose next sample has the earliest deadline among those
// released (ties: the lower index). This is earliest-deadline-first over "Pfair" windows; as
// the weights sum to 1, some sample is always released and no deadline is ever missed, so
// after any n samples the count c_i(n) of every dataset satisfies
//     n * w_i - 1 < c_i(n) < n * w_i + 1,
// i.e. c_i(n) is floor(n * w_i) or ceil(n * w_i) (exactly n * w_i when that is an integer).
// All arithmetic is on integers: the order is the same on every machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace triax::data {

class MixtureSchedule {
 public:
  static constexpr uint64_t kDenominator = uint64_t{1} << 32;

  // Positive, finite weights (checked by the caller's config reader).
  explicit MixtureSchedule(const std::vector<double>& weights);

  size_t size() const { return numerators_.size(); }
  // m_i: the weight of dataset i is numerators()[i] / kDenominator.
  const std::vector<uint64_t>& numerators() const { return numerators_; }
  double weight(size_t i) const { return static_cast<double>(numerators_[i]) / static_cast<double>(kDenominator); }

 private:
  std::vector<uint64_t> numerators_;
};

// A position in a schedule: walks it forward sample by sample, and jumps back through counts
// it recorded on the way. Not thread-safe; each thread keeps its own.
class MixtureCursor {
 public:
  explicit MixtureCursor(const MixtureSchedule& schedule);

  struct Pick {
    size_t dataset;      // the dataset sample `position` comes from
    int64_t occurrence;  // how many earlier samples came from it
  };
  Pick pick(int64_t position);

  // Moves to `position`; counts() then holds each dataset's share of samples [0, position).
  void seek(int64_t position);
  int64_t position() const { return position_; }
  const std::vector<int64_t>& counts() const { return counts_; }

  // Continues from counts saved at `position` (a checkpoint's). Refused if they are not a
  // position this schedule can reach: a sum other than `position`, or a count outside the bound.
  void restore(int64_t position, const std::vector<int64_t>& counts);

 private:
  void reset_to(int64_t position, const std::vector<int64_t>& counts);
  void refresh_window(size_t dataset);
  size_t choose() const;
  void advance();

  const MixtureSchedule* schedule_;
  int64_t position_ = 0;
  std::vector<int64_t> counts_;
  std::vector<unsigned __int128> release_;            // first slot the next sample of each dataset may take
  std::vector<unsigned __int128> deadline_;           // last slot it may take
  std::map<int64_t, std::vector<int64_t>> recorded_;  // counts every kRecordInterval positions
};

}  // namespace triax::data
