#include "examples/seq2seq_attention/tasks.h"

#include <fmt/format.h>

#include <array>
#include <set>

#include "nabla/core/generator.h"
#include "nabla/data/langid.h"
#include "nabla/data/tokenizer.h"

namespace nabla::examples::seq2seq {

using data::SpecialTokens;

namespace {

// ---- dates --------------------------------------------------------------------------------
constexpr std::array<const char*, 12> kMonths = {"january",   "february", "march",    "april",
                                                 "may",       "june",     "july",     "august",
                                                 "september", "october",  "november", "december"};
constexpr std::array<const char*, 7> kDays = {"sunday",   "monday", "tuesday", "wednesday",
                                              "thursday", "friday", "saturday"};

int days_in_month(int y, int m) {
  static constexpr std::array<int, 12> d = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : d[static_cast<size_t>(m - 1)];
}

int day_of_week(int y, int m, int d) {  // Sakamoto; 0 = sunday
  static constexpr std::array<int, 12> t = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
  if (m < 3) y -= 1;
  return (y + y / 4 - y / 100 + y / 400 + t[static_cast<size_t>(m - 1)] + d) % 7;
}

// A human-readable date in one of seven formats and its ISO form; years 1950..2049 so that a
// two-digit year is unambiguous (50..99 -> 19xx, 00..49 -> 20xx).
Pair random_date(Generator& gen) {
  auto draw = [&](uint64_t n) { return static_cast<int>(gen.bits64(gen.advance(1)) % n); };
  const int y = 1950 + draw(100), m = 1 + draw(12),
            d = 1 + draw(static_cast<uint64_t>(days_in_month(y, m)));
  const std::string month = kMonths[static_cast<size_t>(m - 1)];
  const std::string day = kDays[static_cast<size_t>(day_of_week(y, m, d))];
  std::string src;
  switch (draw(7)) {
    case 0:
      src = fmt::format("{}, {} {} {}", day, month, d, y);
      break;
    case 1:
      src = fmt::format("{}/{}/{:02d}", d, m, y % 100);
      break;
    case 2:
      src = fmt::format("{} {}, {}", month, d, y);
      break;
    case 3:
      src = fmt::format("{} {} {}", d, month.substr(0, 3), y);
      break;
    case 4:
      src = fmt::format("{:02d}.{:02d}.{}", d, m, y);
      break;
    case 5:
      src = fmt::format("{} {} {}", day.substr(0, 3), month.substr(0, 3), d) +
            fmt::format(" '{:02d}", y % 100);
      break;
    default:
      src = fmt::format("the {} of {} {}", d, month, y);
      break;
  }
  return {src, data::utf8_chars(fmt::format("{:04d}-{:02d}-{:02d}", y, m, d))};
}

}  // namespace

Dataset make_dates(int64_t n_train, int64_t n_test, uint64_t seed) {
  Generator gen(seed);
  Dataset ds;
  std::set<std::string> seen;
  while (static_cast<int64_t>(ds.train.size()) < n_train ||
         static_cast<int64_t>(ds.test.size()) < n_test) {
    Pair p = random_date(gen);
    if (!seen.insert(p.src).second) continue;
    auto& split = data::fnv1a64(p.src) % 10 == 0 ? ds.test : ds.train;
    const int64_t want = &split == &ds.test ? n_test : n_train;
    if (static_cast<int64_t>(split.size()) < want) split.push_back(std::move(p));
  }
  return ds;
}

}  // namespace nabla::examples::seq2seq
