#include "examples/common/ticks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "nabla/core/error.h"

namespace nabla::viz {

namespace {

constexpr double kTolerance = 1e-9;   // in units of a step: absorbs rounding in lo / step
const std::string kMinus = "\u2212";  // a typographic minus, as matplotlib draws

// 10^e, exact for |e| <= 22 (10^22 = 2^22 5^22 and 5^22 < 2^53), so that k * m * 10^e and
// k * m / 10^-e are the doubles nearest the decimals (2 / 10^7 is the literal 2e-7).
double pow10(int e) {
  const int a = std::abs(e);
  double p = 1;
  if (a <= 22)
    for (int i = 0; i < a; ++i) p *= 10;
  else
    p = std::pow(10.0, a);
  return p;
}

// m x 10^e for a small integer m (a tick index times 1, 2 or 5), as the nearest double.
double scaled(double m, int e) { return (e >= 0 ? m * pow10(e) : m / pow10(-e)) + 0.0; }

void check_finite(const char* fn, double lo, double hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi))
    throw ValueError(fmt::format("{}: bounds must be finite, got [{}, {}]", fn, lo, hi));
}

std::string with_minus(std::string s) {
  if (!s.empty() && s[0] == '-') s = kMinus + s.substr(1);
  return s;
}

std::string power_of_ten_markup(int e) {
  return fmt::format("10<sup>{}</sup>", with_minus(std::to_string(e)));
}

}  // namespace

std::pair<double, double> axis_limits(double lo, double hi, double margin, bool log) {
  check_finite("axis_limits", lo, hi);
  if (lo > hi) std::swap(lo, hi);
  if (log) {
    if (lo <= 0)
      throw ValueError(fmt::format("axis_limits: a log axis needs values > 0, got {}", lo));
    double a = std::log10(lo), b = std::log10(hi);
    const double pad = a == b ? 1.0 : (b - a) * margin;
    return {std::pow(10.0, a - pad), std::pow(10.0, b + pad)};
  }
  if (lo == hi) {
    const double d = lo == 0 ? 1.0 : std::abs(lo) / 10;  // not 0.1 * lo: 3 +- 0.3 gives 2.7, 3.3
    return {lo - d, hi + d};
  }
  const double pad = (hi - lo) * margin;
  return {lo - pad, hi + pad};
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  check_finite("nice_ticks", lo, hi);
  if (max_ticks < 2)
    throw ValueError(fmt::format("nice_ticks: max_ticks must be >= 2, got {}", max_ticks));
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) std::tie(lo, hi) = axis_limits(lo, hi, 0, false);
  const double raw = (hi - lo) / (max_ticks - 1);
  if (!(raw > 0) || !std::isfinite(raw))
    throw ValueError(fmt::format("nice_ticks: cannot divide [{}, {}]", lo, hi));
  int e = static_cast<int>(std::floor(std::log10(raw)));
  // Candidates from the largest nice step below raw upwards; the first whose ticks fit wins.
  for (int tries = 0; tries < 8; ++tries) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = scaled(m, e);
      if (step < raw * (1 - kTolerance)) continue;
      const double k0 = std::ceil(lo / step - kTolerance), k1 = std::floor(hi / step + kTolerance);
      if (k1 - k0 + 1 > max_ticks) continue;
      std::vector<double> ticks;
      for (double k = k0; k <= k1; ++k) ticks.push_back(scaled(k * m, e));
      return ticks;
    }
    ++e;
  }
  throw ValueError(fmt::format("nice_ticks: no step fits [{}, {}]", lo, hi));  // unreachable
}

std::vector<double> log_ticks(double lo, double hi, int max_ticks) {
  check_finite("log_ticks", lo, hi);
  if (lo > hi) std::swap(lo, hi);
  if (lo <= 0) throw ValueError(fmt::format("log_ticks: bounds must be > 0, got [{}, {}]", lo, hi));
  if (max_ticks < 2)
    throw ValueError(fmt::format("log_ticks: max_ticks must be >= 2, got {}", max_ticks));
  const double a = std::log10(lo), b = std::log10(hi);
  const int k0 = static_cast<int>(std::ceil(a - kTolerance));
  const int k1 = static_cast<int>(std::floor(b + kTolerance));
  std::vector<double> ticks;
  if (k1 - k0 + 1 >= 2) {
    // Every stride-th decade, on multiples of the stride (1, 10^3, 10^6 rather than 10, 10^4).
    const int stride = (k1 - k0 + max_ticks) / max_ticks;
    for (int k = k0; k <= k1; ++k)
      if (((k % stride) + stride) % stride == 0) ticks.push_back(scaled(1, k));
    if (ticks.size() >= 2) return ticks;
    ticks.clear();
    for (int k = k0; k <= k1; k += stride) ticks.push_back(scaled(1, k));
    return ticks;
  }
  for (int k = static_cast<int>(std::floor(a)); k <= static_cast<int>(std::ceil(b)); ++k)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = scaled(m, k);
      if (v >= lo * (1 - kTolerance) && v <= hi * (1 + kTolerance)) ticks.push_back(v);
    }
  if (ticks.size() >= 2 && ticks.size() <= static_cast<size_t>(max_ticks)) return ticks;
  return nice_ticks(lo, hi, max_ticks);
}

TickLabels linear_tick_labels(const std::vector<double>& ticks) {
  TickLabels out;
  if (ticks.empty()) return out;
  double max_abs = 0;
  for (double t : ticks) max_abs = std::max(max_abs, std::abs(t));
  const double step = ticks.size() >= 2 ? ticks[1] - ticks[0] : std::max(max_abs, 1.0);
  const int step_exp = static_cast<int>(std::floor(std::log10(step) + kTolerance));
  int shared_exp = 0;
  if (max_abs >= 1e5 || (max_abs > 0 && max_abs < 1e-3)) {
    shared_exp = static_cast<int>(std::floor(std::log10(max_abs) + kTolerance));
    out.multiplier = "\u00d7" + power_of_ten_markup(shared_exp);
  }
  const int decimals = std::max(0, shared_exp - step_exp);
  for (double t : ticks) {
    const double shown = shared_exp >= 0 ? t / pow10(shared_exp) : t * pow10(-shared_exp);
    std::string s = fmt::format("{:.{}f}", shown, decimals);
    if (std::stod(s) == 0) s = fmt::format("{:.{}f}", 0.0, decimals);  // no "-0.0"
    out.labels.push_back(with_minus(s));
  }
  return out;
}

std::vector<std::string> log_tick_labels(const std::vector<double>& ticks) {
  std::vector<std::string> out;
  for (double t : ticks) {
    const int e = static_cast<int>(std::floor(std::log10(t) + kTolerance));
    const double m = t / scaled(1, e);
    const bool whole = std::abs(m - std::round(m)) < 1e-9;
    if (e >= -3 && e <= 4)
      out.push_back(fmt::format("{}", t));
    else if (whole && std::round(m) == 1)
      out.push_back(power_of_ten_markup(e));
    else if (whole)
      out.push_back(fmt::format("{}\u00d7{}", std::round(m), power_of_ten_markup(e)));
    else
      out.push_back(with_minus(fmt::format("{:.3g}", t)));
  }
  return out;
}

std::string format_value(double v, bool all_integers) {
  if (!std::isfinite(v)) return fmt::format("{}", v);
  const double a = std::abs(v);
  std::string s;
  if (all_integers || a >= 100)
    s = a < 1e6 ? fmt::format("{:.0f}", v) : fmt::format("{:.2g}", v);
  else
    s = fmt::format("{:.{}f}", v, a < 10 ? 2 : 1);
  return with_minus(s);
}

}  // namespace nabla::viz
