#include "triax/data/mixture_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "triax/error.hpp"

namespace triax::data {
namespace {

using u128 = unsigned __int128;
constexpr int64_t kRecordInterval = 1 << 16;  // a backward jump replays at most this many samples

}  // namespace

MixtureSchedule::MixtureSchedule(const std::vector<double>& weights) {
  if (weights.empty()) throw Error("a mixture needs at least one dataset");
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (double w : weights)
    if (!(w > 0) || !std::isfinite(w)) throw Error("mixture weights must be positive and finite");
  // Largest remainder: floors first, then the units left go to the largest fractional parts.
  std::vector<double> fraction(weights.size());
  uint64_t assigned = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double exact = weights[i] / total * static_cast<double>(kDenominator);
    numerators_.push_back(static_cast<uint64_t>(std::floor(exact)));
    fraction[i] = exact - std::floor(exact);
    assigned += numerators_.back();
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return fraction[a] > fraction[b]; });
  for (size_t k = 0; assigned < kDenominator; k = (k + 1) % order.size(), ++assigned) ++numerators_[order[k]];
  while (assigned > kDenominator) {  // rounding of the doubles overshot: take from the largest
    --*std::max_element(numerators_.begin(), numerators_.end());
    --assigned;
  }
  // A weight below 2^-32 of the total would vanish: give it the smallest share there is.
  for (auto& m : numerators_)
    if (m == 0) {
      m = 1;
      --*std::max_element(numerators_.begin(), numerators_.end());
    }
}

MixtureCursor::MixtureCursor(const MixtureSchedule& schedule)
    : schedule_(&schedule), release_(schedule.size()), deadline_(schedule.size()) {
  reset_to(0, std::vector<int64_t>(schedule.size(), 0));
}

void MixtureCursor::refresh_window(size_t i) {
  const u128 m = schedule_->numerators()[i];
  const u128 done = static_cast<u128>(counts_[i]) * MixtureSchedule::kDenominator;
  release_[i] = done / m + 1;                                         // floor(c / w) + 1
  deadline_[i] = (done + MixtureSchedule::kDenominator + m - 1) / m;  // ceil((c + 1) / w)
}

void MixtureCursor::reset_to(int64_t position, const std::vector<int64_t>& counts) {
  position_ = position;
  counts_ = counts;
  for (size_t i = 0; i < counts_.size(); ++i) refresh_window(i);
  if (position % kRecordInterval == 0 || recorded_.empty()) recorded_[position] = counts_;
}

size_t MixtureCursor::choose() const {
  const u128 slot = static_cast<u128>(position_) + 1;
  size_t best = counts_.size();
  for (size_t i = 0; i < counts_.size(); ++i)
    if (release_[i] <= slot && (best == counts_.size() || deadline_[i] < deadline_[best])) best = i;
  if (best == counts_.size())  // impossible while the weights sum to 1 (see the header)
    throw Error("mixture schedule: no dataset released at sample " + std::to_string(position_));
  return best;
}

void MixtureCursor::advance() {
  const size_t i = choose();
  ++counts_[i];
  refresh_window(i);
  ++position_;
  if (position_ % kRecordInterval == 0 && !recorded_.count(position_)) recorded_[position_] = counts_;
}

void MixtureCursor::seek(int64_t position) {
  if (position < 0) throw Error("mixture schedule: negative sample position " + std::to_string(position));
  if (position < position_) {
    const auto nearest = std::prev(recorded_.upper_bound(position));  // recorded_ always holds position 0
    reset_to(nearest->first, nearest->second);
  }
  while (position_ < position) advance();
}

MixtureCursor::Pick MixtureCursor::pick(int64_t position) {
  seek(position);
  const size_t i = choose();
  return {i, counts_[i]};
}

void MixtureCursor::restore(int64_t position, const std::vector<int64_t>& counts) {
  if (counts.size() != counts_.size())
    throw Error("the saved data position holds " + std::to_string(counts.size()) + " dataset counts, the mixture has " +
                std::to_string(counts_.size()) + " datasets");
  int64_t sum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    // n * w_i - 1 < c_i < n * w_i + 1, times M.
    const __int128 scaled = static_cast<__int128>(counts[i]) * MixtureSchedule::kDenominator;
    const __int128 expected = static_cast<__int128>(position) * schedule_->numerators()[i];
    const __int128 gap = scaled > expected ? scaled - expected : expected - scaled;
    if (counts[i] < 0 || gap >= static_cast<__int128>(MixtureSchedule::kDenominator))
      throw Error("the saved data position (" + std::to_string(counts[i]) + " of " + std::to_string(position) +
                  " samples from dataset " + std::to_string(i) + ") does not fit the weights " +
                  std::to_string(schedule_->weight(i)) + ": were the weights changed?");
    sum += counts[i];
  }
  if (sum != position)
    throw Error("the saved data position counts " + std::to_string(sum) + " samples over the datasets, but " +
                std::to_string(position) + " in all");
  recorded_.clear();
  recorded_[0] = std::vector<int64_t>(counts.size(), 0);
  recorded_[position] = counts;
  reset_to(position, counts);
}

}  // namespace triax::data
