// Axis ticks for the example figures: "nice" steps of 1, 2 or 5 x 10^k on linear axes (the
// choice of matplotlib's MaxNLocator, https://matplotlib.org/stable/api/ticker_api.html, with
// steps=[1, 2, 5, 10]), decades (and 2, 5 within short ranges) on log axes, and labels that share
// one number of decimals, or one power of ten when the values are huge or tiny.
// Pure functions, no drawing: tests/examples/test_plot.cpp pins exact tick lists.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace nabla::viz {

// The interval an axis shows for data in [lo, hi]: widened by `margin` x its span on each side
// (on log10(value) when `log`). A single value v becomes v +- 10% (+-1 for 0; one decade each way
// on a log axis). Throws ValueError for non-finite bounds, or bounds <= 0 on a log axis.
std::pair<double, double> axis_limits(double lo, double hi, double margin, bool log);

// The multiples of the smallest step in {1, 2, 5} x 10^k that puts at most `max_ticks` ticks in
// [lo, hi] (order of lo and hi does not matter; max_ticks >= 2). Values are exact decimals (0.3 is
// the double 0.3) and 0 is +0. lo == hi is widened as axis_limits does. ValueError when a bound
// is not finite or max_ticks < 2.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);

// Ticks for a log axis over [lo, hi] (0 < lo): the powers of ten inside (every n-th when more
// than max_ticks); with fewer than two of those, 1, 2 and 5 x 10^k; with fewer than two of those,
// nice_ticks. ValueError for lo <= 0 or non-finite bounds.
std::vector<double> log_ticks(double lo, double hi, int max_ticks);

// Labels for ticks from nice_ticks (ascending, equally spaced). `markup` is a Pango markup note
// drawn once at the axis end, e.g. "×10<sup>-5</sup>", when the labels are mantissas of that
// power (values >= 1e5 or all below 1e-3 in magnitude); otherwise empty.
struct TickLabels {
  std::vector<std::string> labels;
  std::string multiplier;
};
TickLabels linear_tick_labels(const std::vector<double>& ticks);

// Labels for log_ticks: plain decimals from 0.001 to 10000, otherwise Pango markup such as
// "10<sup>-6</sup>" or "2×10<sup>7</sup>".
std::vector<std::string> log_tick_labels(const std::vector<double>& ticks);

// A heatmap cell's value: integers as integers when all cells hold integers, otherwise two
// decimals below 10 (0.93), one below 100 (42.5), none below 1e6, then 2 significant digits.
std::string format_value(double v, bool all_integers);

}  // namespace nabla::viz
